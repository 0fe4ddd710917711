"""The study's runs arranged for the bootstrap, and the statistics of one set of runs.

:class:`StudyData` turns the ``runs`` and ``tool_calls`` datasets into one :class:`Group` per
(agent, configuration): per-run arrays keyed by task index, and a per-task matrix of
means over repeats for every quantity that is summed over tasks. :func:`group_statistics`
then computes, for a task-weight matrix ``W`` (see :mod:`forgetting.report.stats.bootstrap`), every
statistic SPEC §6 compares — for all resamples at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from forgetting.foundation.errors import RunOutputError
from forgetting.grid import BASELINE
from forgetting.records.eval_report import EVAL_ERRORS
from forgetting.report.stats.bootstrap import weighted_median
from forgetting.study.statistics import StatsSettings

#: per-run quantities averaged over a task's repeats and summed over tasks (columns of Group.means)
LINEAR: tuple[str, ...] = (
    "resolved",
    "prompt_tokens",
    "output_tokens",
    "cost_flat",
    "cost_cache",
    "n_refetches",
    "n_reads",
    "rate_sum",
    "rate_count",
    "n_outputs_deleted",
    "n_outputs_deleted_refetched",
    "n_outputs_kept",
    "n_outputs_kept_refetched",
    "capped",
    "looping",
)
_COL = {name: i for i, name in enumerate(LINEAR)}

#: per-run quantities whose median over runs may be taken
MEDIAN_INPUTS: tuple[str, ...] = ("turns", "prompt_tokens", "output_tokens", "cost_flat", "cost_cache")

#: what group_statistics returns, one (R,) array each
GROUP_STATISTICS: tuple[str, ...] = (
    "solved",
    "turns",
    "input_tokens",
    "output_tokens",
    "cost_flat",
    "cost_cache",
    "refetch_rate",
    "cost_per_solved",
    "deleted_rate",
    "kept_rate",
    "refetch_distance",
    "capped",
    "looping",
)

_DIMENSIONS = ("policy", "scope", "granularity", "amount", "timing", "keep_last", "model_backend")


@dataclass(frozen=True)
class Group:
    """The runs of one agent under one configuration (or the baseline)."""

    agent: str
    configuration: str
    dims: Mapping[str, object]
    task_of: np.ndarray  # (m,) task index of each present run
    runs: Mapping[str, np.ndarray]  # (m,) per-run values of MEDIAN_INPUTS
    means: np.ndarray  # (n, len(LINEAR)) per-task means over present repeats, 0 where absent
    present: np.ndarray  # (n,) bool: the task has at least one present run
    distance_task_of: np.ndarray  # (k,) task index of each re-fetch event
    distances: np.ndarray  # (k,) re-fetch distances in turns
    n_runs: int
    n_missing: int
    missing_runs: tuple[str, ...] = field(default=())
    #: runs of the group whose evaluation errored (eval_status timeout or error)
    eval_errors: tuple[str, ...] = field(default=())
    #: the tasks of those runs, in task order
    eval_error_tasks: tuple[str, ...] = field(default=())
    #: runs left out because their task had an evaluation error (evaluation.on_error: exclude)
    n_excluded: int = 0

    @property
    def key(self) -> tuple[str, str]:
        return (self.agent, self.configuration)

    @property
    def is_baseline(self) -> bool:
        return self.configuration == BASELINE

    @property
    def repeats(self) -> int:
        if self.task_of.size == 0:
            return 0
        return int(np.bincount(self.task_of).max())


def _column(table: pa.Table, name: str, dtype: type, fill: float) -> np.ndarray:
    col = table.column(name)
    arr = col.to_numpy(zero_copy_only=False)
    if col.null_count:
        mask = np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        arr = np.where(mask, fill, arr)
    return np.asarray(arr, dtype=dtype)


@dataclass(frozen=True)
class StudyData:
    """Every group of a study over one task index."""

    tasks: tuple[str, ...]
    agents: tuple[str, ...]
    groups: Mapping[tuple[str, str], Group]

    @property
    def n_tasks(self) -> int:
        return len(self.tasks)

    def baseline(self, agent: str) -> Group:
        try:
            return self.groups[(agent, BASELINE)]
        except KeyError:
            raise RunOutputError(
                f"runs dataset: agent {agent!r} has no baseline runs; every evaluation is compared with them"
            ) from None

    def evaluations(self) -> list[Group]:
        """The (agent, configuration) groups other than the baselines, in dataset order."""
        return [g for g in self.groups.values() if not g.is_baseline]

    @classmethod
    def from_tables(
        cls,
        runs: pa.Table,
        tool_calls: pa.Table | None = None,
        *,
        task_order: Sequence[str] = (),
        agent_order: Sequence[str] = (),
        exclude_eval_errors: bool = False,
    ) -> StudyData:
        """Arrange ``runs`` (RUNS_SCHEMA) and ``tool_calls`` (TOOL_CALLS_SCHEMA) by group and task.

        Tasks are ordered as ``task_order`` (the study's list) then any others sorted; rows
        with status ``missing`` count as missing runs. Null outcomes count as not resolved,
        null counters as zero and a null turn count is left out of medians. A run whose
        evaluation errored is counted in its group's ``eval_errors``; with
        ``exclude_eval_errors`` every run of its task in its group is left out, so the task is
        not present for the group (and drops out of each comparison the group takes part in).
        """
        if runs.num_rows == 0:
            raise RunOutputError("runs dataset: no runs")
        run_ids = _column(runs, "run_id", object, "")
        agents = _column(runs, "agent", object, "")
        confs = _column(runs, "configuration", object, "")
        task_names = _column(runs, "task", object, "")
        status = _column(runs, "status", object, "")
        known = set(task_order)
        tasks = [t for t in task_order if t in set(task_names.tolist())]
        tasks += sorted(set(task_names.tolist()) - known)
        task_index = {t: i for i, t in enumerate(tasks)}
        n = len(tasks)
        tix = np.array([task_index[t] for t in task_names], dtype=np.int64)
        missing = status == "missing"
        eval_status = _column(runs, "eval_status", object, None)
        errored = np.array([v in EVAL_ERRORS for v in eval_status.tolist()], dtype=bool) & ~missing

        values = {
            "resolved": _column(runs, "resolved", np.float64, 0.0),
            "turns": _column(runs, "turns", np.float64, np.nan),
            "prompt_tokens": _column(runs, "prompt_tokens", np.float64, 0.0),
            "output_tokens": _column(runs, "output_tokens", np.float64, 0.0),
            "cost_flat": _column(runs, "cost_flat", np.float64, 0.0),
            "cost_cache": _column(runs, "cost_cache", np.float64, 0.0),
            "n_refetches": _column(runs, "n_refetches", np.float64, 0.0),
            "n_reads": _column(runs, "n_reads", np.float64, 0.0),
            "n_outputs_deleted": _column(runs, "n_outputs_deleted", np.float64, 0.0),
            "n_outputs_deleted_refetched": _column(runs, "n_outputs_deleted_refetched", np.float64, 0.0),
            "n_outputs_kept": _column(runs, "n_outputs_kept", np.float64, 0.0),
            "n_outputs_kept_refetched": _column(runs, "n_outputs_kept_refetched", np.float64, 0.0),
            "capped": _column(runs, "capped", np.float64, 0.0),
            "looping": _column(runs, "looping", np.float64, 0.0),
        }
        with np.errstate(invalid="ignore", divide="ignore"):
            has_reads = values["n_reads"] > 0
            values["rate_sum"] = np.where(
                has_reads, values["n_refetches"] / np.where(has_reads, values["n_reads"], 1), 0
            )
        values["rate_count"] = has_reads.astype(np.float64)

        dims_cols = {d: runs.column(d).to_pylist() for d in _DIMENSIONS if d in runs.column_names}

        # re-fetch events, keyed to their run's group and task
        run_row = {rid: i for i, rid in enumerate(run_ids.tolist())}
        ev_row = np.zeros(0, dtype=np.int64)
        ev_dist = np.zeros(0, dtype=np.float64)
        if tool_calls is not None and tool_calls.num_rows:
            is_ref = _column(tool_calls, "is_refetch", bool, False)
            dist = _column(tool_calls, "refetch_distance", np.float64, np.nan)
            keep = is_ref & ~np.isnan(dist)
            tc_runs = _column(tool_calls, "run_id", object, "")[keep]
            rows = np.array([run_row.get(r, -1) for r in tc_runs], dtype=np.int64)
            ok = rows >= 0
            ev_row, ev_dist = rows[ok], dist[keep][ok]

        # group rows by (agent, configuration), in order of first appearance
        key_index: dict[tuple[str, str], int] = {}
        inverse = np.array(
            [
                key_index.setdefault((a, c), len(key_index))
                for a, c in zip(agents.tolist(), confs.tolist(), strict=True)
            ],
            dtype=np.int64,
        )
        ev_group = inverse[ev_row] if ev_row.size else np.zeros(0, dtype=np.int64)
        # (group, task) cells with an evaluation error; excluded cells drop every run of the cell
        cell = inverse * max(n, 1) + tix
        error_cells = np.unique(cell[errored])
        excluded = np.isin(cell, error_cells) & ~missing if exclude_eval_errors else np.zeros_like(missing)
        dropped = missing | excluded
        groups: dict[tuple[str, str], Group] = {}
        for (agent, conf), gi in key_index.items():
            rows = np.flatnonzero(inverse == gi)
            present_rows = rows[~dropped[rows]]
            t = tix[present_rows]
            counts = np.bincount(t, minlength=n).astype(np.float64)
            means = np.zeros((n, len(LINEAR)))
            for name, col in _COL.items():
                means[:, col] = np.bincount(t, weights=values[name][present_rows], minlength=n)
            with np.errstate(invalid="ignore", divide="ignore"):
                means = np.where(counts[:, None] > 0, means / np.maximum(counts, 1)[:, None], 0.0)
            first = present_rows[0] if present_rows.size else rows[0]
            dims = {d: dims_cols[d][first] for d in dims_cols}
            ev = ev_row[ev_group == gi] if ev_row.size else ev_row
            ev_keep = ~dropped[ev]
            groups[(agent, conf)] = Group(
                agent=agent,
                configuration=conf,
                dims=dims,
                task_of=t,
                runs={name: values[name][present_rows] for name in MEDIAN_INPUTS},
                means=means,
                present=counts > 0,
                distance_task_of=tix[ev][ev_keep],
                distances=(ev_dist[ev_group == gi] if ev_row.size else ev_dist)[ev_keep],
                n_runs=int(present_rows.size),
                n_missing=int(missing[rows].sum()),
                missing_runs=tuple(sorted(run_ids[rows[missing[rows]]].tolist())),
                eval_errors=tuple(sorted(run_ids[rows[errored[rows]]].tolist())),
                eval_error_tasks=tuple(tasks[t] for t in sorted(set(tix[rows[errored[rows]]].tolist()))),
                n_excluded=int(excluded[rows].sum()),
            )
        agent_list = [a for a in agent_order if any(k[0] == a for k in groups)]
        agent_list += sorted({k[0] for k in groups} - set(agent_list))
        return cls(tasks=tuple(tasks), agents=tuple(agent_list), groups=groups)


def _median_of(group: Group, name: str, weights: np.ndarray, settings: StatsSettings) -> np.ndarray:
    values = group.runs[name]
    if settings.baseline_median == "task_mean" and group.repeats > 1:
        # the median over tasks of the per-task mean over repeats
        n = weights.shape[1]
        ok = ~np.isnan(values)
        sums = np.bincount(group.task_of[ok], weights=values[ok], minlength=n)
        cnt = np.bincount(group.task_of[ok], minlength=n)
        with np.errstate(invalid="ignore", divide="ignore"):
            task_means = np.where(cnt > 0, sums / np.maximum(cnt, 1), np.nan)
        return weighted_median(task_means, np.arange(n), weights)
    return weighted_median(values, group.task_of, weights)


def group_statistics(
    group: Group, weights: np.ndarray, settings: StatsSettings, mask: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """Every statistic of :data:`GROUP_STATISTICS` of ``group`` for each row of ``weights``.

    ``mask`` (n,) restricts the group to some tasks (the tasks an evaluation and its baseline
    both have); ``weights`` is ``(R, n)`` task multiplicities. Sums run over tasks of per-task
    means over repeats, so a 5-repeat baseline counts like a 1-repeat configuration.
    """
    w = weights.astype(np.float64, copy=False)
    if mask is not None and not mask.any():
        # no task to compute on: every statistic is undefined, none is 0
        return {name: np.full(w.shape[0], np.nan) for name in GROUP_STATISTICS}
    if mask is not None and not mask.all():
        w = w * mask[None, :]
    totals = w @ group.means  # (R, len(LINEAR))

    def col(name: str) -> np.ndarray:
        return totals[:, _COL[name]]

    out: dict[str, np.ndarray] = {}
    with np.errstate(invalid="ignore", divide="ignore"):
        out["solved"] = col("resolved")
        out["turns"] = _median_of(group, "turns", w, settings)
        for stat, name in (
            ("input_tokens", "prompt_tokens"),
            ("output_tokens", "output_tokens"),
            ("cost_flat", "cost_flat"),
            ("cost_cache", "cost_cache"),
        ):
            out[stat] = (
                col(name) if settings.cost_statistic == "total" else _median_of(group, name, w, settings)
            )
        if settings.refetch_rate == "pooled":
            out["refetch_rate"] = col("n_refetches") / col("n_reads")
        else:
            out["refetch_rate"] = col("rate_sum") / col("rate_count")
        out["cost_per_solved"] = col("cost_cache") / col("resolved")
        out["deleted_rate"] = col("n_outputs_deleted_refetched") / col("n_outputs_deleted")
        out["kept_rate"] = col("n_outputs_kept_refetched") / col("n_outputs_kept")
        out["refetch_distance"] = weighted_median(group.distances, group.distance_task_of, w)
        out["capped"] = col("capped")
        out["looping"] = col("looping")
    return out
