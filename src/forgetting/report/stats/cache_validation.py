"""The reconstruction checked against the server: reconstructed cached share vs the reported one.

For every (agent, configuration) — baselines included — and every pricing profile of the
``run_costs`` dataset, over the calls whose server reported cached tokens (each run's
``reported_calls``, :mod:`forgetting.cost.result`):

* **reported share** = Σ the server's cached tokens / Σ the server's ``prompt_tokens``;
* **reconstructed share** = Σ the profile's cache hits / Σ the rebuilt prompts' tokens (each
  side in its own count, so a prompt-length drift shows in the prompt check, not here);
* **gap** = reconstructed − reported (a share; positive: the profile expects more cache hits
  than the server gave), with a paired bootstrap CI: both shares come from the same runs, and
  the resampled unit is the task (SPEC §6), with the study's weight matrix
  (:class:`forgetting.report.stats.comparisons.Bootstrap`), so the same resamples as every effect.

Sums run over tasks of each task's mean over its runs (as every total of the statistics).
Every analysed run counts (an evaluation error does not change what was billed). A row whose
runs reported no cached tokens has no share and no gap (NaN; the tables and the figure say so
and count it) — never a 0. Each row also carries the prompt check of its runs (calls whose
rebuilt prompt differs from the server's ``prompt_tokens`` beyond ``pricing.prompt_tolerance``,
and the mean difference in tokens per checked call: a constant one points at a fixed block such
as the tools text) and the costs of those calls priced both ways (``cost_reported`` from the server's counts,
``cost_reconstructed`` the profile's caching-aware cost), summed the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from forgetting.report.stats.bootstrap import percentile_interval
from forgetting.report.stats.labels import agent_key, configuration_key
from forgetting.report.stats.metrics import StudyData
from forgetting.report.stats.schemas import CACHE_VALIDATION_SCHEMA

#: per-run quantities of a profile's run_costs row, averaged over a task's runs, summed over tasks
_SUMMED = (
    "reported_cached_tokens",
    "reported_prompt_tokens",
    "reconstructed_cached_tokens",
    "reconstructed_prompt_tokens",
    "cost_reported",
    "cost_cache_on_reported",
    "cross_run_cached_tokens",
)
_RC, _RP, _CC, _CP, _COST_REP, _COST_REC, _XR = range(len(_SUMMED))


def _values(table: pa.Table, name: str) -> np.ndarray:
    return np.asarray(pc.fill_null(table.column(name), 0).to_numpy(zero_copy_only=False), dtype=np.float64)


def _shares(totals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(reported within the run, reconstructed) shares of ``totals`` (R, len(_SUMMED)); NaN
    where undefined. The reported share here leaves out the cross-run hits (their own column)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        reported = np.where(totals[:, _RP] > 0, (totals[:, _RC] - totals[:, _XR]) / totals[:, _RP], np.nan)
        rebuilt = np.where(totals[:, _CP] > 0, totals[:, _CC] / totals[:, _CP], np.nan)
    return reported, rebuilt


def _cross_share(totals: np.ndarray) -> float:
    with np.errstate(invalid="ignore", divide="ignore"):
        return float(totals[0, _XR] / totals[0, _RP]) if totals[0, _RP] > 0 else float("nan")


def compute_cache_validation(
    runs: pa.Table,
    run_costs: pa.Table,
    data: StudyData,
    weights: Callable[[np.ndarray], np.ndarray],
    confidence: float,
    profiles: Sequence[str] = (),
) -> pa.Table:
    """One row per (agent, configuration, profile) (:data:`CACHE_VALIDATION_SCHEMA`).

    ``weights`` gives the study's ``(R, n_tasks)`` bootstrap weight matrix over ``data.tasks``
    for a task mask: a row resamples the tasks its configuration has runs of, those alone
    (:meth:`forgetting.report.stats.comparisons.Bootstrap.weights_for`);
    ``profiles`` the order of the profiles (others of ``run_costs`` follow, sorted)."""
    present = runs.filter(pc.not_equal(pc.fill_null(runs.column("status"), ""), "missing"))
    task_index = {t: i for i, t in enumerate(data.tasks)}
    where = {
        rid: ((agent, conf), task_index[task])
        for rid, agent, conf, task in zip(
            *(present.column(c).to_pylist() for c in ("run_id", "agent", "configuration", "task")), strict=True
        )
    }
    check_columns = ("run_id", "prompt_checked_calls", "prompt_mismatch_calls", "prompt_token_difference")
    mismatch = {
        rid: (int(checked or 0), int(bad or 0), int(diff or 0))
        for rid, checked, bad, diff in zip(*(present.column(c).to_pylist() for c in check_columns), strict=True)
    }
    found = sorted(set(run_costs.column("profile").to_pylist()))
    order = [p for p in profiles if p in found] + [p for p in found if p not in profiles]
    n = data.n_tasks
    ones = np.ones((1, n))
    groups = sorted(
        data.groups.values(),
        key=lambda g: (agent_key(g.agent, data.agents), configuration_key(g.configuration, g.dims)),
    )
    rows: list[dict[str, object]] = []
    by_profile = {p: run_costs.filter(pc.equal(run_costs.column("profile"), p)) for p in order}
    for g in groups:
        for profile in order:
            costs = by_profile[profile]
            ids = costs.column("run_id").to_pylist()
            mine = np.array([where.get(r, (None,))[0] == g.key for r in ids], dtype=bool)
            tix = np.array([where[r][1] for r, m in zip(ids, mine, strict=True) if m], dtype=np.int64)
            values = (np.stack([_values(costs, c)[mine] for c in _SUMMED], axis=1) if mine.any()
                      else np.zeros((0, len(_SUMMED))))
            calls = _values(costs, "calls")[mine]
            reported_calls = _values(costs, "reported_calls")[mine]
            counts = np.bincount(tix, minlength=n).astype(np.float64)
            means = np.zeros((n, len(_SUMMED)))
            for k in range(len(_SUMMED)):
                means[:, k] = np.bincount(tix, weights=values[:, k], minlength=n)
            means = np.where(counts[:, None] > 0, means / np.maximum(counts, 1)[:, None], 0.0)
            reported, rebuilt = _shares(ones @ means)
            boot_reported, boot_rebuilt = _shares(weights(counts > 0) @ means)
            samples = boot_rebuilt - boot_reported
            lo, hi = percentile_interval(samples, confidence)
            point = ones @ means
            reporting_tasks = np.bincount(tix[reported_calls > 0], minlength=n) > 0
            run_ids = [r for r, m in zip(ids, mine, strict=True) if m]
            checked = [mismatch.get(r, (0, 0, 0)) for r in run_ids]
            n_checked = sum(c for c, _, _ in checked)
            rows.append(
                {
                    "agent": g.agent,
                    "configuration": g.configuration,
                    "policy": g.dims.get("policy"),
                    "scope": g.dims.get("scope"),
                    "granularity": g.dims.get("granularity"),
                    "amount": g.dims.get("amount"),
                    "timing": g.dims.get("timing"),
                    "keep_last": g.dims.get("keep_last"),
                    "profile": profile,
                    "n_runs": len(run_ids),
                    "n_tasks": int(reporting_tasks.sum()),
                    "calls": int(calls.sum()),
                    "reported_calls": int(reported_calls.sum()),
                    "runs_without_reports": int((reported_calls == 0).sum()),
                    "prompt_checked_calls": n_checked,
                    "prompt_mismatch_calls": sum(b for _, b, _ in checked),
                    "runs_with_mismatch": sum(1 for _, b, _ in checked if b),
                    "prompt_difference_per_call": (
                        sum(d for _, _, d in checked) / n_checked if n_checked else float("nan")
                    ),
                    "reported_share": float(reported[0]) + (_cross_share(point) if point[0, _RP] > 0 else 0.0),
                    "reconstructed_share": float(rebuilt[0]),
                    "cross_run_share": _cross_share(point),
                    "estimate": float(rebuilt[0] - reported[0]),
                    "ci_low": float(lo),
                    "ci_high": float(hi),
                    "n_undefined": int(np.isnan(samples).sum()),
                    "cost_reported": float(point[0, _COST_REP]) if point[0, _RP] > 0 else float("nan"),
                    "cost_reconstructed": float(point[0, _COST_REC]) if point[0, _RP] > 0 else float("nan"),
                }
            )
    return pa.Table.from_pylist(rows, schema=CACHE_VALIDATION_SCHEMA)
