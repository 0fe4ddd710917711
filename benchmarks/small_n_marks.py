"""How often the percentile bootstrap marks a true null significant, by number of tasks.

The argument for ``statistics.min_paired_tasks`` (docs/statistics.md, "Too few tasks to mark"):
simulated studies where the configuration has no effect at all, analysed with the package's own
resampling and percentile interval (:mod:`forgetting.report.stats.bootstrap`); a mark is a 95 % CI that
excludes the null. Printed per number of paired tasks: the share of studies marked (nominal
0.05) for three of the study's statistics — Δ tasks solved (paired resolved outcomes), the ratio
of median turns (log-normal run lengths) and the ratio of totals (log-normal costs, the
configuration's a mean-preserving noisy copy of the baseline's).

    PYTHONPATH=src:testkit/src python benchmarks/small_n_marks.py [studies] [resamples]
"""

from __future__ import annotations

import sys
import time

import numpy as np

from forgetting.report.stats.bootstrap import percentile_interval, resample_indices

SIZES = (3, 4, 5, 6, 8, 10, 12, 15, 20, 30)


def marked(samples: np.ndarray, null: float) -> bool:
    lo, hi = percentile_interval(samples, 0.95)
    return bool(lo > null or hi < null)


def main() -> None:
    studies = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    resamples = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    rng = np.random.default_rng(27)
    started = time.perf_counter()
    print(f"{studies} null studies per size, {resamples} resamples each; share marked at 95 % (nominal 0.05)")
    print(f"{'tasks':>5}  {'Δ solved':>9}  {'median ratio':>12}  {'total ratio':>11}")
    for n in SIZES:
        hits = np.zeros(3)
        for k in range(studies):
            idx = resample_indices(n, resamples, seed=k)
            base = (rng.random(n) < 0.5).astype(float)
            conf = np.where(rng.random(n) < 0.7, base, (rng.random(n) < 0.5).astype(float))
            turns = rng.lognormal(3.0, 0.6, n)
            turns_conf = turns * rng.lognormal(0.0, 0.4, n)  # same median
            cost_conf = turns * rng.lognormal(-0.08, 0.4, n)  # same mean
            hits[0] += marked((conf - base)[idx].sum(axis=1), 0.0)
            hits[1] += marked(np.median(turns_conf[idx], axis=1) / np.median(turns[idx], axis=1), 1.0)
            hits[2] += marked(cost_conf[idx].sum(axis=1) / turns[idx].sum(axis=1), 1.0)
        share = hits / studies
        print(f"{n:>5}  {share[0]:>9.3f}  {share[1]:>12.3f}  {share[2]:>11.3f}")
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
