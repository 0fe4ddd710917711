"""Per-batch analysis: each finished run's outcome, behaviour and cost as table rows.

For every run of a batch this joins what the earlier stages left in its directory —
``run.json`` (the runner), ``eval.json`` (evaluation), the trajectory and call log — with
the behaviour labeller (:func:`forgetting.behaviour.label_run`) and the cost reconstruction
(:func:`forgetting.cost.cost_run`), and writes the batch's ``summary`` (one row per run,
:data:`~forgetting.records.schemas.RUNS_SCHEMA`), ``calls``, ``tool_calls``, ``run_costs`` and
``timings`` tables. A run whose outputs are missing or unreadable is named in the log with
the file at fault and gets a summary row without status whose ``error`` says why, and no
other rows: collection reports it by name, with that reason.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from forgetting.behaviour import label_run
from forgetting.cost import cost_run
from forgetting.foundation.errors import UserError
from forgetting.foundation.faults import checkpoint
from forgetting.foundation.layout import CALLS, EVAL_JSON, PATCH, RUN_JSON, Layout
from forgetting.foundation.stagelog import StageLog
from forgetting.records import RunDir, RunRecord, open_run_dir
from forgetting.records.calllog import TornCallLog, read_call_log
from forgetting.records.eval_report import read_checked_report
from forgetting.records.schemas import (
    CALLS_SCHEMA,
    RUN_COSTS_SCHEMA,
    RUNS_SCHEMA,
    TIMINGS_SCHEMA,
    TOOL_CALLS_SCHEMA,
    write_dataset,
)
from forgetting.study.config import Study
from forgetting.study.plan import Batch, Run

#: batch output name → its declared schema
OUTPUT_SCHEMAS: dict[str, pa.Schema] = {
    "summary": RUNS_SCHEMA,
    "calls": CALLS_SCHEMA,
    "tool_calls": TOOL_CALLS_SCHEMA,
    "run_costs": RUN_COSTS_SCHEMA,
    "timings": TIMINGS_SCHEMA,
}


class MissingStageOutput(UserError):
    """A run lacks (or has an unreadable) output of an earlier stage."""


@dataclass(frozen=True)
class RunAnalysis:
    summary: dict[str, Any]
    calls: pa.Table
    tool_calls: pa.Table
    run_costs: pa.Table
    timing: dict[str, Any]


def _check_call_log(path: Path, run_id: str, turns: int) -> None:
    """A finished run's call log must be whole and its own (read once; the behaviour and cost
    stages reuse the parsed log)."""
    if not path.is_file():
        raise MissingStageOutput(f"{path}: call log not found; every run writes one (rerun this run)")
    try:
        log = read_call_log(path)
    except TornCallLog as exc:
        raise MissingStageOutput(f"{exc}; rerun this run") from None
    owner = log.header.get("run_id")
    if owner and owner != run_id:
        raise MissingStageOutput(f"{path}: the call log of run {owner}, not of {run_id}")
    if len(log.calls) < turns:
        raise MissingStageOutput(
            f"{path}: {len(log.calls)} model calls logged but run.json records {turns}; "
            "the call log is truncated (rerun this run)"
        )


def _run_record(run_dir: Path, study: Study, run: Run) -> tuple[RunDir, RunRecord]:
    """The run directory and its record, checked against the study and the plan."""
    if not (run_dir / RUN_JSON).is_file():
        raise MissingStageOutput(f"{run_dir / RUN_JSON}: run record not found")
    try:
        found = open_run_dir(run_dir)
    except UserError as exc:
        raise MissingStageOutput(str(exc)) from None
    record = found.record
    assert record is not None
    # the one check of the synthetic marker: synthetic runs only in a study that says it is one
    if record.synthetic and not study.plan.synthetic:
        raise MissingStageOutput(
            f"{run_dir / RUN_JSON}: a synthetic run (forgetting-synth) in a study without study.synthetic: true; "
            "synthetic runs are never analysed with real results"
        )
    if record.seed != run.seed:
        raise MissingStageOutput(
            f"{run_dir / RUN_JSON}: seed {record.seed} differs from the plan's {run.seed}; rerun it with force_rerun"
        )
    return found, record


def analyze_run(study: Study, run: Run, *, profiles: Sequence[Any], primary: str) -> RunAnalysis:
    """The analysis of one finished and evaluated run (MissingStageOutput if it is not)."""
    run_dir = Layout(study.results_dir).run_dir(run.run_id)
    found, record = _run_record(run_dir, study, run)
    try:
        report = read_checked_report(run_dir / EVAL_JSON)
    except UserError as exc:
        raise MissingStageOutput(str(exc)) from None
    try:
        _check_call_log(run_dir / CALLS, run.run_id, record.turns)
        behaviour = label_run(found, **study.analysis.label_options())
        tolerance = float(study.pricing.prompt_tolerance)
        cost = cost_run(found, profiles, primary=primary, run_id=run.run_id, prompt_tolerance=tolerance)
    except UserError as exc:
        raise MissingStageOutput(str(exc)) from None

    patch = run_dir / PATCH
    status = record.status
    summary: dict[str, Any] = {name: None for name in RUNS_SCHEMA.names}
    summary.update(run.identity())
    summary.update(
        model_backend=record.model_backend,
        status=status,
        exit_status=record.exit_status,
        turns=record.turns,
        context_exceeded=status == "context_exceeded",
        patch_missing=not patch.is_file() or not patch.read_text(encoding="utf-8", errors="replace").strip(),
        error=record.error,
        eval_status=report.get("status"),
        resolved=bool(report.get("resolved")),
    )
    summary.update({k: v for k, v in behaviour.summary.items() if k in RUNS_SCHEMA.names})
    summary.update({k: v for k, v in cost.summary.items() if k in RUNS_SCHEMA.names})
    if status == "capped":
        summary["capped"] = True

    def with_run_id(table: pa.Table) -> pa.Table:
        ids = pa.array([run.run_id] * table.num_rows, pa.string())
        return table.set_column(table.schema.get_field_index("run_id"), "run_id", ids)

    timing = {
        "run_id": run.run_id,
        "started": record.started,
        "wall_s": record.wall_s,
        "model_s": record.model_s,
        "calls": summary.get("turns"),
    }
    return RunAnalysis(
        summary, with_run_id(cost.calls), with_run_id(behaviour.table), with_run_id(cost.run_costs), timing
    )


def _table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=schema)


def _concat(tables: list[pa.Table], schema: pa.Schema) -> pa.Table:
    if not tables:
        return schema.empty_table()
    return pa.concat_tables([t.select(schema.names).cast(schema) for t in tables])


def analyze_batch(
    study: Study,
    batch: Batch,
    *,
    outputs: Mapping[str, str | os.PathLike[str]],
    log: str | os.PathLike[str] | None = None,
) -> int:
    """Analyse every run of ``batch`` and write its tables; return the number of runs analysed."""
    profiles, primary = study.pricing.profiles, study.pricing.primary
    summaries: list[dict[str, Any]] = []
    timings: list[dict[str, Any]] = []
    calls: list[pa.Table] = []
    tool_calls: list[pa.Table] = []
    run_costs: list[pa.Table] = []
    with StageLog(log, echo=True) as stage:
        for i, run in enumerate(batch.runs, start=1):
            try:
                result = analyze_run(study, run, profiles=profiles, primary=primary)
            except MissingStageOutput as exc:
                stage.line(f"[{i}/{len(batch.runs)}] {run.run_id}: not analysed: {exc}")
                # a row without status, the reason in `error`: collection lists the run with it
                reason = f"not analysed: {exc}"
                summaries.append({**dict.fromkeys(RUNS_SCHEMA.names), **run.identity(), "error": reason})
                continue
            summaries.append(result.summary)
            timings.append(result.timing)
            calls.append(result.calls)
            tool_calls.append(result.tool_calls)
            run_costs.append(result.run_costs)
        analysed = sum(1 for row in summaries if row["status"] is not None)
        stage.line(f"{batch.key}: {analysed} of {len(batch.runs)} runs analysed")
        tables = {
            "summary": _table(summaries, RUNS_SCHEMA),
            "calls": _concat(calls, CALLS_SCHEMA),
            "tool_calls": _concat(tool_calls, TOOL_CALLS_SCHEMA),
            "run_costs": _concat(run_costs, RUN_COSTS_SCHEMA),
            "timings": _table(timings, TIMINGS_SCHEMA),
        }
        for name, path in outputs.items():
            write_dataset(tables[name], path, OUTPUT_SCHEMAS[name])
            checkpoint("analyze.output")
    return analysed
