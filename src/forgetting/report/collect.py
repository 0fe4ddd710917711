"""Collection: every batch's analysis tables into the study's Parquet datasets (SPEC §7).

Each batch directory ``results/…/batches/{agent}/{configuration}/{batch}/`` holds
``summary.parquet`` (one row per run), ``calls.parquet``, ``tool_calls.parquet``,
``run_costs.parquet`` and, when the analysis wrote it, ``timings.parquet``. Collection checks
them against the run plan and writes ``results/…/datasets/{runs,calls,tool_calls,run_costs,
timings}.parquet`` with the declared schemas, sorted in plan order. The datasets are replaced
as a set, and only once every new one is complete: a collection that stops on a bad run, fails
or is killed leaves the last good datasets as they were (the workflow's ``collect`` rule flags
them ``update``, so Snakemake does not delete them before the job either).

Every planned run must be accounted for. A run is *missing* when its batch file is absent,
unreadable, off-schema, breaks its declared key (two rows for one run, one call, …) or holds
a run that is not in the batch's plan, when the summary has no row for it, when its row has
no status, or when its seed differs from the plan's (output of another study seed). Each
missing run is logged by name, one line per run, and then, by ``statistics.missing_runs``:

``fail`` (default)  nothing is written and :class:`RunOutputError` names the count and the
                    first runs, and what the first one lacks and which stage makes it;
``mark``            the run gets a ``runs`` row with status ``missing`` and the reason in
                    ``error``; statistics compare each evaluation on the tasks it and its
                    baseline both have.

A missing or unreadable ``timings.parquet`` is logged and leaves those runs without timing
rows: wall-clock data is never needed by the statistics.

Evaluation errors (a run whose ``eval_status`` is ``timeout`` or ``error``) are collected like
any outcome, and each is logged by name; ``evaluation.on_error`` decides in the statistics what
they count as (docs/evaluation.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from forgetting.foundation.atomic import atomic_paths
from forgetting.foundation.errors import RunOutputError, UserError
from forgetting.foundation.faults import checkpoint
from forgetting.foundation.layout import Layout
from forgetting.foundation.stagelog import StageLog
from forgetting.records.eval_report import is_eval_error
from forgetting.records.schemas import DATASETS, RUNS_SCHEMA, checked_dataset, read_dataset, write_table
from forgetting.study.config import Study
from forgetting.study.plan import Batch, Run, plan_batches, plan_runs

#: dataset name → the per-batch file it is collected from
BATCH_FILES: dict[str, str] = {
    "runs": "summary.parquet",
    "calls": "calls.parquet",
    "tool_calls": "tool_calls.parquet",
    "run_costs": "run_costs.parquet",
    "timings": "timings.parquet",
}
#: batch files without which a run counts as missing
REQUIRED: tuple[str, ...] = ("runs", "calls", "tool_calls", "run_costs")

#: sort keys after plan order (run_id), per dataset
SORT_KEYS: dict[str, tuple[str, ...]] = {
    "runs": (),
    "calls": ("call",),
    "tool_calls": ("turn", "index"),
    "run_costs": ("profile",),
    "timings": (),
}


@dataclass
class CollectReport:
    """What collection found: run counts, every missing run with its reason, the files written."""

    planned: int
    missing: list[tuple[str, str]] = field(default_factory=list)
    outputs: dict[str, Path] = field(default_factory=dict)
    #: runs whose evaluation errored (eval_status timeout or error), in batch order
    eval_errors: list[str] = field(default_factory=list)

    @property
    def collected(self) -> int:
        return self.planned - len(self.missing)


def output_paths(
    study: Study, outputs: Sequence[str | os.PathLike[str]] | Mapping[str, str] | None
) -> dict[str, Path]:
    """Dataset name → output path, from Snakemake's output list (matched by file stem) or the layout."""
    if outputs is None:
        layout = Layout(study.results_dir)
        return {name: layout.dataset(name) for name in DATASETS}
    if isinstance(outputs, Mapping):
        paths = {str(k): Path(v) for k, v in outputs.items()}
    else:
        paths = {Path(p).stem: Path(p) for p in outputs}
    unknown = sorted(set(paths) - set(DATASETS))
    if unknown:
        raise UserError(
            f"collect: unknown dataset output(s) {', '.join(unknown)}; expected {', '.join(DATASETS)}"
        )
    return paths


def _read_batch(batch_dir: Path, name: str) -> tuple[pa.Table | None, str | None]:
    path = batch_dir / BATCH_FILES[name]
    if not path.is_file():
        return None, f"{path} not found"
    try:
        return read_dataset(path, DATASETS[name]), None
    except RunOutputError as exc:
        return None, str(exc)


def _missing_row(run: Run, reason: str) -> dict[str, object]:
    row: dict[str, object] = {name: None for name in RUNS_SCHEMA.names}
    row.update(
        run.identity(),
        status="missing",
        error=reason,
    )
    return row


def _collect_batch(
    batch: Batch, batch_dir: Path, log: StageLog
) -> tuple[dict[str, pa.Table], list[tuple[str, str]]]:
    """The batch's rows of good runs per dataset, and its missing runs with their reasons."""
    tables: dict[str, pa.Table | None] = {}
    for name in BATCH_FILES:
        tables[name], problem = _read_batch(batch_dir, name)
        if problem is not None:
            if name in REQUIRED:
                return {}, [(r.run_id, problem) for r in batch.runs]
            log.line(f"warning: {problem}; batch {batch.key} has no timing rows")
    summary = tables["runs"]
    assert summary is not None
    planned = {r.run_id: r for r in batch.runs}
    for name, table in tables.items():
        if table is None:
            continue
        foreign = _foreign_run(table, planned)
        if foreign is not None:
            where = batch_dir / BATCH_FILES[name]
            if name not in REQUIRED:
                log.line(f"warning: {where}: run {foreign} is not in this batch's plan; batch {batch.key} "
                         "has no timing rows")
                tables[name] = None
                continue
            reason = f"{where}: run {foreign} is not in this batch's plan (a stale analysis? rerun it)"
            return {}, [(r.run_id, reason) for r in batch.runs]
    ids = summary.column("run_id").to_pylist()
    statuses = summary.column("status").to_pylist()
    seeds = summary.column("seed").to_pylist()
    errors = summary.column("error").to_pylist()
    row_of = {rid: i for i, rid in enumerate(ids)}  # one row per run: read_dataset checked the key
    good: list[str] = []
    missing: list[tuple[str, str]] = []
    summary_path = batch_dir / BATCH_FILES["runs"]
    for run in batch.runs:
        row = row_of.get(run.run_id)
        if row is None:
            missing.append((run.run_id, f"no row in {summary_path}"))
        elif statuses[row] is None:  # the analysis could not analyse it, and says why
            missing.append((run.run_id, errors[row] or f"row without status in {summary_path}"))
        elif seeds[row] != run.seed:
            missing.append(
                (
                    run.run_id,
                    f"seed {seeds[row]} in {summary_path} differs from the plan's {run.seed} "
                    "(output of another study seed?)",
                )
            )
        else:
            good.append(run.run_id)
    keep = pa.array(good, pa.string())
    out: dict[str, pa.Table] = {}
    for name, table in tables.items():
        if table is None:
            continue
        out[name] = table.filter(pc.is_in(table.column("run_id"), value_set=keep))
    return out, missing


def _eval_errors(table: pa.Table) -> list[tuple[str, str]]:
    pairs = zip(table.column("run_id").to_pylist(), table.column("eval_status").to_pylist(), strict=True)
    return [(rid, status) for rid, status in pairs if is_eval_error(status)]


def _foreign_run(table: pa.Table, planned: Mapping[str, Run]) -> str | None:
    """The first run id of ``table`` that is not a run of the batch, or None."""
    ids = table.column("run_id")
    outside = pc.invert(pc.is_in(ids, value_set=pa.array(sorted(planned), pa.string())))
    if not pc.any(outside).as_py():
        return None
    return str(ids.filter(outside)[0].as_py())


def _sorted(table: pa.Table, name: str, order: Mapping[str, int]) -> pa.Table:
    positions = pa.array([order[r] for r in table.column("run_id").to_pylist()], pa.int64())
    keyed = table.append_column("__order", positions)
    keys = [("__order", "ascending"), *[(k, "ascending") for k in SORT_KEYS[name]]]
    return keyed.sort_by(keys).drop_columns(["__order"])


def _why(reason: str) -> str:
    """What the first missing run lacks and what makes it: its stage's output, named by the
    reason the analysis gave (an absent evaluation is the evaluation's to redo, not the analysis')."""
    if "evaluation report not found" in reason:
        return f"is not evaluated ({reason}): run the workflow without regenerate=true, which evaluates it"
    if "run record not found" in reason:
        return f"has not finished ({reason}): run the workflow without regenerate=true, which runs it"
    return f"({reason}): rerun the stage that writes it (the workflow redoes each missing output)"


def collect(
    study: Study,
    outputs: Sequence[str | os.PathLike[str]] | Mapping[str, str] | None = None,
    log: str | os.PathLike[str] | None = None,
    *,
    echo: bool = False,
) -> CollectReport:
    """Collect every batch of ``study`` into its datasets; see the module docstring."""
    settings = study.statistics
    paths = output_paths(study, outputs)
    layout = Layout(study.results_dir)
    runs = plan_runs(study)
    order = {r.run_id: i for i, r in enumerate(runs)}
    by_id = {r.run_id: r for r in runs}
    report = CollectReport(planned=len(runs))
    parts: dict[str, list[pa.Table]] = {name: [] for name in DATASETS}
    with StageLog(log, echo=echo) as out:
        for batch in plan_batches(study, runs):
            tables, missing = _collect_batch(batch, layout.batch_dir(batch.key), out)
            for name, table in tables.items():
                parts[name].append(table)
            report.missing.extend(missing)
        for rid, reason in report.missing:
            out.line(f"missing run {rid}: {reason}")
        for table in parts["runs"]:
            for rid, status in _eval_errors(table):
                report.eval_errors.append(rid)
                out.line(f"evaluation error {rid}: eval_status {status} (evaluation.on_error decides)")
        if report.missing and settings.missing_runs == "fail":
            first = ", ".join(rid for rid, _ in report.missing[:3])
            more = f" and {len(report.missing) - 3} more" if len(report.missing) > 3 else ""
            where = f" (each named in {log})" if log else ""
            raise RunOutputError(
                f"collect: {len(report.missing)} of {report.planned} planned runs have no readable output"
                f"{where}: {first}{more}; the first {_why(report.missing[0][1])}, or set statistics.missing_runs: mark"
            )
        if report.missing:
            rows = [_missing_row(by_id[rid], reason) for rid, reason in report.missing]
            parts["runs"].append(pa.Table.from_pylist(rows, schema=RUNS_SCHEMA))
        names = [name for name in DATASETS if name in paths]
        # the datasets are replaced as a set, once every new one is written: a collection that
        # fails or is killed on the way leaves the last good datasets in place
        tables = {}
        for name in names:
            schema = DATASETS[name]
            table = pa.concat_tables(parts[name]) if parts[name] else schema.empty_table()
            tables[name] = checked_dataset(_sorted(table, name, order), paths[name], schema)
        with atomic_paths([paths[name] for name in names]) as temps:
            for name, tmp in zip(names, temps, strict=True):
                write_table(tables[name], tmp)
                checkpoint("collect.dataset")
        report.outputs.update((name, paths[name]) for name in names)
        out.line(
            f"collected {report.collected} of {report.planned} planned runs"
            + (f" ({len(report.missing)} marked missing)" if report.missing else "")
            + (f" ({len(report.eval_errors)} evaluation errors)" if report.eval_errors else "")
            + f" into {', '.join(str(p) for p in report.outputs.values())}",
            echo=False,
        )
    return report
