"""Benchmark: prompt-cache accounting, radix tree vs the naive way.

Synthetic runs shaped like the study's: 200 calls, a 3k-token preamble, turns of ~150
assistant + ~590 tool-output tokens, so the last prompt holds ~150k tokens. Scenarios:

* ``turn-50``: delayed turn-level deletion — at each call the turn that became eligible
  is rewritten (placeholder) with probability 1/2;
* ``token-25``: immediate token-level deletion — every call rewrites the previous turn's
  output (25 % of its tokens removed): a rewrite in every call;
* ``baseline``: append-only.

For each run the fast path (:func:`forgetting.cost.accounting.account`: radix tree over
interned blocks) and the naive path (:func:`forgetting_testkit.naive_cost.naive_prefixes`: every
prompt materialized and compared with every earlier prompt token by token) must give
identical (prompt, LCP, boundary) per call; the script asserts it and prints both times
and their ratio (target ≥ 50×), plus a vectorized naive variant (numpy compare of every
pair) as a harder baseline.

    PYTHONPATH=src:testkit/src python benchmarks/cost.py [--calls 200] [--scenarios turn-50 token-25 baseline]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "testkit" / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from forgetting.cost.accounting import account, split
from forgetting.cost.pricing import PricingProfile
from forgetting.cost.prompts import BlockStore, CallPrompt, RunPrompts
from forgetting_testkit.naive_cost import naive_prefixes

IM_START, IM_END, NL = 151644, 151645, 198
ROLE = {"system": 8948, "user": 872, "assistant": 77091}
PAPER = PricingProfile("paper", 0.45, 0.09, 2.25, 0.45)


def _block(rng: np.random.Generator, role: str, n: int) -> list[int]:
    return [IM_START, ROLE[role], NL, *rng.integers(0, 150_000, n).tolist(), IM_END, NL]


def synthetic_run(scenario: str, calls: int, seed: int) -> RunPrompts:
    rng = np.random.default_rng(seed)
    store = BlockStore()
    gen = store.intern([IM_START, ROLE["assistant"], NL])
    history = [store.intern(_block(rng, "system", 2000)), store.intern(_block(rng, "user", 1000))]
    turns: list[tuple[int, int, list[int]]] = []  # (assistant block, output block, output tokens)
    run = RunPrompts(f"synthetic/{scenario}/{seed}", Path("synthetic"), "calllog", store)
    for i in range(calls):
        if i > 0:
            assistant = [
                IM_START,
                ROLE["assistant"],
                NL,
                *rng.integers(0, 150_000, int(rng.integers(60, 240))).tolist(),
                IM_END,
                NL,
            ]
            output = _block(rng, "user", int(rng.integers(200, 980)))
            turns.append((store.intern(assistant), store.intern(output), output))
            history += [turns[-1][0], turns[-1][1]]
        if scenario == "turn-50" and len(turns) >= 3 and rng.random() < 0.5:
            k = len(turns) - 3  # the turn that just left the last two
            placeholder = [*turns[k][2][:3], 58, 2150, 9125, 60, IM_END, NL]
            history[2 + 2 * k + 1] = store.intern(placeholder)
        elif scenario == "token-25" and len(turns) >= 2:
            k = len(turns) - 2  # the previous turn's output, newly eligible
            body = turns[k][2][3:-2]
            keep = np.sort(rng.choice(len(body), size=len(body) - len(body) // 4, replace=False))
            history[2 + 2 * k + 1] = store.intern([*turns[k][2][:3], *(body[j] for j in keep), IM_END, NL])
        run.calls.append(CallPrompt(i + 1, (*history, gen), len(history), int(rng.integers(50, 300))))
    return run


def numpy_naive(run: RunPrompts) -> list[tuple[int, int]]:
    prompts = [np.asarray(run.prompt_tokens(c), dtype=np.int32) for c in run.calls]
    out = []
    for i, p in enumerate(prompts):
        best = 0
        for q in prompts[:i]:
            n = min(len(p), len(q))
            diff = np.flatnonzero(p[:n] != q[:n])
            best = max(best, int(diff[0]) if diff.size else n)
        out.append((len(p), best))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--scenarios", nargs="+", default=["turn-50", "token-25", "baseline"])
    args = ap.parse_args()
    print(
        f"{'scenario':<10} {'last prompt':>11} {'cached':>7} {'rebilled':>8} {'fast s':>8} {'naive s':>8} "
        f"{'ratio':>7} {'numpy s':>8} {'ratio':>6}"
    )
    ratios = []
    for scenario in args.scenarios:
        run = synthetic_run(scenario, args.calls, args.seed)
        t0 = time.perf_counter()
        fast = account(run, [PAPER])
        t_fast = time.perf_counter() - t0
        t0 = time.perf_counter()
        naive = naive_prefixes(run)
        t_naive = time.perf_counter() - t0
        t0 = time.perf_counter()
        vec = numpy_naive(run)
        t_vec = time.perf_counter() - t0
        got = [(a.prompt_tokens, a.prefix_tokens, a.boundary) for a in fast]
        assert got == naive, f"{scenario}: fast and naive accounting differ"
        assert [(n, lcp) for n, lcp, _ in naive] == vec, f"{scenario}: numpy naive differs"
        splits = [split(n, lcp, b) for n, lcp, b in naive]
        cached = sum(s[0] for s in splits)
        rebilled = sum(s[2] for s in splits)
        total = sum(n for n, _, _ in naive)
        if scenario == "baseline":
            assert rebilled == 0, "append-only run with re-billed tokens"
        ratios.append(t_naive / t_fast)
        print(
            f"{scenario:<10} {naive[-1][0]:>11,} {cached / total:>7.1%} {rebilled / total:>8.1%} "
            f"{t_fast:>8.3f} "
            f"{t_naive:>8.2f} {t_naive / t_fast:>6.0f}x {t_vec:>8.2f} {t_vec / t_fast:>5.0f}x"
        )
    print(
        f"identical numbers in every scenario; min speed ratio vs token-by-token naive: {min(ratios):.0f}x "
        f"(target >= 50x)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
