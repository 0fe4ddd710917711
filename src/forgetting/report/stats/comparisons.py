"""Effects of each evaluation against its baseline, and paired comparisons between configurations.

For every evaluation (agent, configuration) and metric (SPEC §6):

=================  ==========  ===============================================  ======
metric             kind        estimate                                          null
=================  ==========  ===============================================  ======
tasks_solved       difference  solved(config) − solved(baseline)                 0
turns              ratio       median turns, config / baseline                   1
input_tokens       ratio       input (prompt) tokens, config / baseline          1
output_tokens      ratio       output tokens, config / baseline                  1
cost_flat          ratio       cost under flat pricing, config / baseline        1
cost_cache         ratio       cost under caching-aware pricing                  1
refetch_rate       ratio       re-fetch rate, config / baseline                  1
cost_per_solved    ratio       caching-aware cost per task solved                1
deleted_vs_kept    within      re-fetch rate of deleted / of kept read outputs   1
refetch_distance   median      median turns between a re-fetch and its source    (none)
=================  ==========  ===============================================  ======

Every statistic is computed on the configuration and on the baseline restricted to the same
resampled tasks (one weight matrix for the whole study). Paired comparisons take the
difference ``second − first`` of two evaluations' estimates in each resample: *timing*
(delayed → immediate, equal policy, scope, granularity, amount) and *granularity* (turn →
token, equal policy, scope, amount, timing) — the paper's policy only; other policies are
compared with their baseline like every evaluation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from forgetting.deletion.names import is_paper_like
from forgetting.grid import BASELINE
from forgetting.report.stats.bootstrap import (
    bootstrap_p,
    ones_weights,
    percentile_interval,
    resample_weights,
    subset_weights,
)
from forgetting.report.stats.labels import agent_key, configuration_key
from forgetting.report.stats.metrics import Group, StudyData, group_statistics
from forgetting.report.stats.schemas import COMPARISONS_SCHEMA, EFFECTS_SCHEMA, SUMMARY_SCHEMA
from forgetting.study.statistics import StatsSettings


@dataclass(frozen=True)
class Metric:
    name: str
    kind: str  # difference | ratio | within | median
    statistic: str  # the group statistic it is built from
    null: float | None


METRICS: tuple[Metric, ...] = (
    Metric("tasks_solved", "difference", "solved", 0.0),
    Metric("turns", "ratio", "turns", 1.0),
    Metric("input_tokens", "ratio", "input_tokens", 1.0),
    Metric("output_tokens", "ratio", "output_tokens", 1.0),
    Metric("cost_flat", "ratio", "cost_flat", 1.0),
    Metric("cost_cache", "ratio", "cost_cache", 1.0),
    Metric("refetch_rate", "ratio", "refetch_rate", 1.0),
    Metric("cost_per_solved", "ratio", "cost_per_solved", 1.0),
    Metric("deleted_vs_kept", "within", "deleted_rate", 1.0),
    Metric("refetch_distance", "median", "refetch_distance", None),
)
METRIC_BY_NAME = {m.name: m for m in METRICS}

#: metrics compared between configurations (on the difference of their estimates)
COMPARED: tuple[str, ...] = (
    "tasks_solved",
    "turns",
    "input_tokens",
    "cost_flat",
    "cost_cache",
    "refetch_rate",
)

#: comparison → (dimension that varies, its first value, its second value)
COMPARISONS: dict[str, tuple[str, str, str]] = {
    "timing": ("timing", "delayed", "immediate"),
    "granularity": ("granularity", "turn", "token"),
}


def effect_samples(
    metric: Metric, conf: Mapping[str, np.ndarray], base: Mapping[str, np.ndarray]
) -> np.ndarray:
    """The metric's estimate in every row of already-computed group statistics."""
    with np.errstate(invalid="ignore", divide="ignore"):
        if metric.kind == "difference":
            return conf[metric.statistic] - base[metric.statistic]
        if metric.kind == "ratio":
            return conf[metric.statistic] / base[metric.statistic]
        if metric.kind == "within":
            return conf["deleted_rate"] / conf["kept_rate"]
        return np.asarray(conf[metric.statistic], dtype=np.float64)


class Bootstrap:
    """The study's resampling and a cache of group statistics per task mask.

    A comparison on ``K`` of the study's ``n`` tasks (the others missing, or excluded for an
    evaluation error) resamples those ``K`` (:meth:`weights_for`); every comparison on the
    same tasks shares one weight matrix, so comparisons between configurations stay paired.
    """

    def __init__(self, data: StudyData, settings: StatsSettings) -> None:
        self.data = data
        self.settings = settings
        # task multiplicities as floats once: every statistic multiplies them
        self.weights = resample_weights(data.n_tasks, settings.resamples, settings.seed).astype(np.float64)
        self.ones = ones_weights(data.n_tasks).astype(np.float64)
        self._cache: dict[tuple[tuple[str, str], bytes], tuple[dict, dict]] = {}
        self._weights: dict[bytes, np.ndarray] = {}

    def weights_for(self, mask: np.ndarray) -> np.ndarray:
        """The ``(R, n)`` multiplicities of a resample of the tasks in ``mask`` alone
        (:func:`~forgetting.report.stats.bootstrap.subset_weights`; all tasks: :attr:`weights`)."""
        mask = np.asarray(mask, dtype=bool)
        if mask.all():
            return self.weights
        key = np.packbits(mask).tobytes()
        if key not in self._weights:
            self._weights[key] = subset_weights(mask, self.settings.resamples, self.settings.seed).astype(np.float64)
        return self._weights[key]

    def statistics(
        self, group: Group, mask: np.ndarray
    ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """(point, bootstrap) statistics of ``group`` on the tasks in ``mask``, the bootstrap
        resampling those tasks alone."""
        key = (group.key, np.packbits(mask).tobytes())
        if key not in self._cache:
            point = group_statistics(group, self.ones, self.settings, mask)
            boot = group_statistics(group, self.weights_for(mask), self.settings, mask)
            self._cache[key] = (point, boot)
        return self._cache[key]


def _mask(*groups: Group) -> np.ndarray:
    out = np.ones(groups[0].present.shape, dtype=bool)
    for g in groups:
        out &= g.present
    return out


def _dims(group: Group) -> dict[str, object]:
    d = group.dims
    return {
        "policy": d.get("policy"),
        "scope": d.get("scope"),
        "granularity": d.get("granularity"),
        "amount": d.get("amount"),
        "timing": d.get("timing"),
        "keep_last": d.get("keep_last"),
    }


def _interval(samples: np.ndarray, point: float, null: float | None, confidence: float) -> dict[str, object]:
    lo, hi = percentile_interval(samples, confidence)
    undefined = int(np.isnan(samples).sum())
    if null is None or np.isnan(point):
        p, sig = float("nan"), None
    else:
        p = float(bootstrap_p(samples, null))
        sig = bool(lo > null or hi < null) if not (np.isnan(lo) or np.isnan(hi)) else None
    return {
        "ci_low": float(lo),
        "ci_high": float(hi),
        "p_value": p,
        "significant": sig,
        "n_undefined": undefined,
    }


def ordered_evaluations(data: StudyData) -> list[Group]:
    return sorted(
        data.evaluations(),
        key=lambda g: (agent_key(g.agent, data.agents), configuration_key(g.configuration, g.dims)),
    )


def compute_effects(boot: Bootstrap) -> pa.Table:
    """One row per evaluation and metric (:data:`EFFECTS_SCHEMA`)."""
    data, settings = boot.data, boot.settings
    rows: list[dict[str, object]] = []
    for group in ordered_evaluations(data):
        base = data.baseline(group.agent)
        mask = _mask(group, base)
        c_point, c_boot = boot.statistics(group, mask)
        b_point, b_boot = boot.statistics(base, mask)
        for metric in METRICS:
            estimate = float(effect_samples(metric, c_point, b_point)[0])
            samples = effect_samples(metric, c_boot, b_boot)
            if metric.kind == "within":
                value, reference = float(c_point["deleted_rate"][0]), float(c_point["kept_rate"][0])
            else:
                value = float(c_point[metric.statistic][0])
                reference = float(b_point[metric.statistic][0])
            rows.append(
                {
                    "agent": group.agent,
                    "configuration": group.configuration,
                    **_dims(group),
                    "metric": metric.name,
                    "kind": metric.kind,
                    "value": value,
                    "reference": reference,
                    "estimate": estimate,
                    "null": float("nan") if metric.null is None else metric.null,
                    "n_tasks": int(mask.sum()),
                    **_interval(samples, estimate, metric.null, settings.confidence),
                }
            )
    return pa.Table.from_pylist(rows, schema=EFFECTS_SCHEMA)


def comparison_pairs(data: StudyData) -> list[tuple[str, Group, Group]]:
    """(comparison, first, second) for every matched pair of evaluations, in table order.
    Only the paper's policy at the paper's timings is paired (:func:`is_paper_like`): other
    policies have no delayed/immediate or turn/token counterpart in the paper's sense."""
    evaluations = [g for g in ordered_evaluations(data) if is_paper_like(g.dims)]
    pairs = []
    for comparison, (dim, first_value, second_value) in COMPARISONS.items():
        shared = [k for k in ("policy", "scope", "granularity", "amount", "timing") if k != dim]
        by_key = {}
        for g in evaluations:
            if g.dims.get(dim) == second_value:
                by_key[(g.agent, *(g.dims.get(k) for k in shared))] = g
        for g in evaluations:
            if g.dims.get(dim) != first_value:
                continue
            other = by_key.get((g.agent, *(g.dims.get(k) for k in shared)))
            if other is not None:
                pairs.append((comparison, g, other))
    return pairs


def compute_comparisons(boot: Bootstrap) -> pa.Table:
    """One row per compared pair and metric (:data:`COMPARISONS_SCHEMA`)."""
    data, settings = boot.data, boot.settings
    rows: list[dict[str, object]] = []
    for comparison, first, second in comparison_pairs(data):
        base = data.baseline(first.agent)
        mask = _mask(first, second, base)
        b_point, b_boot = boot.statistics(base, mask)
        f_point, f_boot = boot.statistics(first, mask)
        s_point, s_boot = boot.statistics(second, mask)
        dim = COMPARISONS[comparison][0]
        for name in COMPARED:
            metric = METRIC_BY_NAME[name]
            f_est = float(effect_samples(metric, f_point, b_point)[0])
            s_est = float(effect_samples(metric, s_point, b_point)[0])
            with np.errstate(invalid="ignore"):
                samples = effect_samples(metric, s_boot, b_boot) - effect_samples(metric, f_boot, b_boot)
            estimate = s_est - f_est
            dims = _dims(first)
            rows.append(
                {
                    "agent": first.agent,
                    "comparison": comparison,
                    "first": first.configuration,
                    "second": second.configuration,
                    "policy": dims["policy"],
                    "scope": dims["scope"],
                    "granularity": None if dim == "granularity" else dims["granularity"],
                    "amount": dims["amount"],
                    "timing": None if dim == "timing" else dims["timing"],
                    "metric": name,
                    "first_estimate": f_est,
                    "second_estimate": s_est,
                    "estimate": estimate,
                    "n_tasks": int(mask.sum()),
                    **_interval(samples, estimate, 0.0, settings.confidence),
                }
            )
    return pa.Table.from_pylist(rows, schema=COMPARISONS_SCHEMA)


COST_COMPONENTS: tuple[str, ...] = (
    "cost_cached",
    "cost_new",
    "cost_rebilled",
    "cost_cache_write",
    "cost_output",
)


def summary_mask(data: StudyData, group: Group) -> np.ndarray:
    """The tasks a summary row is computed on: for an evaluation, the tasks it and its baseline
    both have (the tasks of its effects); for a baseline, its own."""
    base = data.groups.get((group.agent, BASELINE))
    if group.is_baseline or base is None:
        return group.present
    return _mask(group, base)


def compute_summary(
    data: StudyData,
    settings: StatsSettings,
    components: Mapping[tuple[str, str], Mapping[str, np.ndarray]] | None = None,
    profile: str | None = None,
) -> pa.Table:
    """One row per group incl. baselines (:data:`SUMMARY_SCHEMA`). Every column of a row is
    computed on the same tasks (:func:`summary_mask`), so an evaluation's tasks solved, cost
    components and totals are those its Δ and ratios compare; ``baseline_cost`` is the
    baseline's caching-aware cost (the sum of its components) on those tasks."""
    ones = ones_weights(data.n_tasks)
    groups = sorted(
        data.groups.values(),
        key=lambda g: (agent_key(g.agent, data.agents), configuration_key(g.configuration, g.dims)),
    )
    rows = []
    for g in groups:
        mask = summary_mask(data, g)
        s = {k: float(v[0]) for k, v in group_statistics(g, ones, settings, mask).items()}
        has_tasks = bool(mask.any())  # on no task, no cost is 0: it is undefined
        comp = (components or {}).get(g.key) if has_tasks else None
        base_comp = (components or {}).get((g.agent, BASELINE)) if has_tasks else None
        rows.append(
            {
                "agent": g.agent,
                "configuration": g.configuration,
                **_dims(g),
                "n_runs": g.n_runs,
                "n_missing": g.n_missing,
                "n_tasks": int(mask.sum()),
                "repeats": g.repeats,
                "tasks_solved": s["solved"],
                "median_turns": s["turns"],
                "capped": s["capped"],
                "looping": s["looping"],
                "input_tokens": s["input_tokens"],
                "output_tokens": s["output_tokens"],
                "cost_flat": s["cost_flat"],
                "cost_cache": s["cost_cache"],
                "refetch_rate": s["refetch_rate"],
                "refetch_distance": s["refetch_distance"],
                "deleted_rate": s["deleted_rate"],
                "kept_rate": s["kept_rate"],
                "model_backend": g.dims.get("model_backend"),
                "pricing_profile": profile,
                **{c: (float(comp[c][mask].sum()) if comp else None) for c in COST_COMPONENTS},
                "baseline_cost": (
                    float(sum(base_comp[c][mask].sum() for c in COST_COMPONENTS)) if base_comp else None
                ),
                "n_eval_errors": len(g.eval_errors),
                "eval_error_tasks": list(g.eval_error_tasks),
                "n_excluded": g.n_excluded,
            }
        )
    return pa.Table.from_pylist(rows, schema=SUMMARY_SCHEMA)


def cost_components(
    runs: pa.Table, run_costs: pa.Table, profile: str, data: StudyData
) -> dict[tuple[str, str], dict[str, np.ndarray]]:
    """Per group and cost component, the per-task mean over the task's present repeats
    (``(n_tasks,)``, 0 where the group has no run of the task); a summary row sums it over
    its tasks."""
    costs = run_costs.filter(pc.equal(run_costs.column("profile"), profile))
    index = {rid: i for i, rid in enumerate(costs.column("run_id").to_pylist())}
    comp_cols = {
        c: np.nan_to_num(np.asarray(costs.column(c).to_numpy(zero_copy_only=False), dtype=float))
        for c in COST_COMPONENTS
    }
    task_index = {t: i for i, t in enumerate(data.tasks)}
    acc: dict[tuple[str, str], dict[str, np.ndarray]] = {}
    counts: dict[tuple[str, str], np.ndarray] = {}
    status = runs.column("status").to_pylist()
    for rid, agent, conf, task, st in zip(
        runs.column("run_id").to_pylist(),
        runs.column("agent").to_pylist(),
        runs.column("configuration").to_pylist(),
        runs.column("task").to_pylist(),
        status,
        strict=True,
    ):
        if st == "missing" or rid not in index:
            continue
        key = (agent, conf)
        if key not in acc:
            acc[key] = {c: np.zeros(data.n_tasks) for c in COST_COMPONENTS}
            counts[key] = np.zeros(data.n_tasks)
        t = task_index[task]
        counts[key][t] += 1
        for c in COST_COMPONENTS:
            acc[key][c][t] += comp_cols[c][index[rid]]
    out = {}
    for key, comps in acc.items():
        n = np.maximum(counts[key], 1)
        out[key] = {c: v / n for c, v in comps.items()}
    return out


def missing_cost_runs(runs: pa.Table, run_costs: pa.Table, profile: str) -> list[str]:
    """Present runs without a ``run_costs`` row for ``profile``."""
    have = set(run_costs.filter(pc.equal(run_costs.column("profile"), profile)).column("run_id").to_pylist())
    return [
        rid
        for rid, st in zip(runs.column("run_id").to_pylist(), runs.column("status").to_pylist(), strict=True)
        if st != "missing" and rid not in have
    ]
