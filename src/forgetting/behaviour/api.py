"""The behaviour analysis of one run: labels, re-fetches, looping, capped (SPEC §3–§4).

:func:`label_run` is what the analysis stage and ``forgetting label`` call.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from forgetting.behaviour.events import ToolCallEvent, Trajectory
from forgetting.behaviour.load import AGENTS, Deletions, load_deletions, load_trajectory
from forgetting.behaviour.outcome import is_capped, is_looping, longest_identical_streak
from forgetting.behaviour.refetch import detect_refetches
from forgetting.behaviour.rules import load_rules
from forgetting.foundation.errors import RunOutputError, UserError
from forgetting.foundation.layout import TRAJECTORY
from forgetting.records import CallLogFile, Located, RunDir, RunRecord, locate
from forgetting.records.schemas import TOOL_CALLS_SCHEMA

#: the per-run behaviour columns of schemas.RUNS_SCHEMA that :attr:`BehaviourResult.summary` fills
SUMMARY_COLUMNS: tuple[str, ...] = (
    "n_tool_calls",
    "n_reads",
    "n_refetches",
    "refetch_rate",
    "n_refetches_deleted",
    "n_refetches_kept",
    "median_refetch_distance",
    "n_outputs_deleted",
    "n_outputs_deleted_refetched",
    "n_outputs_kept",
    "n_outputs_kept_refetched",
    "looping",
    "capped",
)


@dataclass(frozen=True)
class BehaviourResult:
    run_id: str
    source: Path  # the trajectory file read
    agent: str
    turns: int
    exit_status: str
    table: pa.Table  # one row per tool call, schemas.TOOL_CALLS_SCHEMA
    summary: dict[str, Any]  # SUMMARY_COLUMNS
    events: tuple[ToolCallEvent, ...] = ()
    labels: tuple[str, ...] = ()
    label_counts: Mapping[str, int] = field(default_factory=dict)
    longest_streak: int = 0
    deletions: Deletions | None = None  # what was read from the proxy's call log, if any

    def line(self) -> str:
        """A one-line summary for a terminal."""
        s = self.summary
        rate = "n/a" if s["refetch_rate"] is None else f"{s['refetch_rate']:.3f}"
        med = "n/a" if s["median_refetch_distance"] is None else f"{s['median_refetch_distance']:g}"
        counts = " ".join(f"{k}={v}" for k, v in sorted(self.label_counts.items()))
        return (
            f"{self.run_id or self.source}: agent={self.agent} turns={self.turns} "
            f"tool_calls={s['n_tool_calls']} "
            f"[{counts}] reads={s['n_reads']} refetches={s['n_refetches']} rate={rate} "
            f"refetches_deleted={s['n_refetches_deleted']} refetches_kept={s['n_refetches_kept']} "
            f"median_distance={med} outputs_deleted={s['n_outputs_deleted']} "
            f"({s['n_outputs_deleted_refetched']} re-fetched) outputs_kept={s['n_outputs_kept']} "
            f"({s['n_outputs_kept_refetched']} re-fetched) looping={s['looping']} capped={s['capped']} "
            f"exit={self.exit_status or '?'}"
        )


def _check_options(threshold: float, looping_window: int, turn_cap: int | None) -> None:
    if not 0 < threshold <= 1:
        raise UserError(f"refetch threshold {threshold}: must be in (0, 1]")
    if looping_window < 2:
        raise UserError(f"looping window {looping_window}: must be at least 2")
    if turn_cap is not None and turn_cap < 1:
        raise UserError(f"turn cap {turn_cap}: must be at least 1")


def label_trajectory(
    traj: Trajectory,
    *,
    run_id: str = "",
    deletions: Deletions | None = None,
    record: RunRecord | None = None,
    threshold: float = 0.8,
    looping_window: int = 10,
    turn_cap: int | None = None,
    rules: str | os.PathLike[str] | None = None,
) -> BehaviourResult:
    """Label a loaded trajectory (see :func:`label_run`)."""
    _check_options(threshold, looping_window, turn_cap)
    table_rules = load_rules(rules)
    deletions = deletions or Deletions()
    events = traj.events
    labels = tuple(table_rules.label_tool(traj.agent, e.tool, e.arguments, e.output) for e in events)
    rows, rsum = detect_refetches(
        [e.turn for e in events],
        [e.payload for e in events],
        [lab == "read" for lab in labels],
        deletions,
        threshold,
    )
    turns = record.turns if record is not None else traj.turns
    cap = turn_cap
    if cap is None:
        cap = record.turn_cap if record is not None and record.turn_cap > 0 else traj.turn_cap
    exit_status = (record.exit_status if record is not None else "") or traj.exit_status
    streak = longest_identical_streak(events)
    summary: dict[str, Any] = {
        "n_tool_calls": len(events),
        "n_reads": rsum.n_reads,
        "n_refetches": rsum.n_refetches,
        "refetch_rate": rsum.refetch_rate,
        "n_refetches_deleted": rsum.n_refetches_deleted,
        "n_refetches_kept": rsum.n_refetches_kept,
        "median_refetch_distance": rsum.median_refetch_distance,
        "n_outputs_deleted": rsum.n_outputs_deleted,
        "n_outputs_deleted_refetched": rsum.n_outputs_deleted_refetched,
        "n_outputs_kept": rsum.n_outputs_kept,
        "n_outputs_kept_refetched": rsum.n_outputs_kept_refetched,
        "looping": is_looping(events, looping_window),
        "capped": is_capped(turns, cap, exit_status, record.status if record is not None else None),
    }
    table = pa.table(
        {
            "run_id": [run_id] * len(events),
            "turn": [e.turn for e in events],
            "index": [e.index for e in events],
            "tool": [e.tool for e in events],
            "summary": [e.summary() for e in events],
            "label": list(labels),
            "is_read": [r is not None for r in rows],
            "n_distinct_lines": [r.n_distinct_lines if r else None for r in rows],
            "is_refetch": [r.is_refetch if r else None for r in rows],
            "overlap": [r.overlap if r else None for r in rows],
            "refetch_distance": [r.distance if r else None for r in rows],
            "was_deleted": [r.was_deleted if r else None for r in rows],
        },
        schema=TOOL_CALLS_SCHEMA,
    )
    return BehaviourResult(
        run_id=run_id, source=traj.source, agent=traj.agent, turns=turns, exit_status=exit_status, table=table,
        summary=summary, events=events, labels=labels, label_counts=dict(Counter(labels)), longest_streak=streak,
        deletions=deletions if deletions.source is not None else None,
    )


def label_run(
    path: str | os.PathLike[str] | Located,
    *,
    agent: str | None = None,
    threshold: float = 0.8,
    looping_window: int = 10,
    turn_cap: int | None = None,
    rules: str | os.PathLike[str] | None = None,
    call_log: str | os.PathLike[str] | None = None,
    allow_torn: bool = False,
) -> BehaviourResult:
    """Label one run: a run directory of ours, or a trajectory file of either agent (a path,
    or what :func:`forgetting.records.locate` made of one).

    A run directory gives the run id, ``run.json`` (turns, status) and the proxy's call log
    (deletions); a bare trajectory has run id ``""`` and no deletions unless ``call_log`` is
    given. ``turn_cap`` overrides the cap recorded in ``run.json`` or the trajectory. A torn
    call log is an error unless ``allow_torn`` (then the deletions of the calls before the
    torn line are used; ``result.deletions.torn_line`` says where it was).
    """
    _check_options(threshold, looping_window, turn_cap)
    found = locate(path)
    options: dict[str, Any] = {
        "threshold": threshold, "looping_window": looping_window, "turn_cap": turn_cap, "rules": rules
    }
    if isinstance(found, CallLogFile):
        raise RunOutputError(
            f"{found.path}: a call log, not a trajectory; label its run directory, or a trajectory with --call-log"
        )
    if isinstance(found, RunDir):
        if found.trajectory is None:
            raise RunOutputError(f"{found.path}: no {TRAJECTORY} in this run directory; rerun this run")
        inferred = found.record.agent if found.record is not None else found.run_id.split("/")[0]
        traj = load_trajectory(found.trajectory, agent or (inferred if inferred in AGENTS else None))
        log = call_log or found.calls
        deletions = load_deletions(log, allow_torn=allow_torn) if log else None
        return label_trajectory(traj, run_id=found.run_id, deletions=deletions, record=found.record, **options)
    traj = load_trajectory(found.path, agent)
    deletions = load_deletions(call_log, allow_torn=allow_torn) if call_log else None
    return label_trajectory(traj, deletions=deletions, **options)
