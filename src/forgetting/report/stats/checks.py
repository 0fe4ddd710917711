"""What the statistics check in the datasets before computing anything.

Each problem is one :class:`~forgetting.foundation.errors.RunOutputError` line naming the dataset and an
example, raised before the bootstrap:

* every present run has an evaluation status (``eval_status``, one of
  :data:`~forgetting.records.eval_report.STATUSES`);
* every ``tool_calls`` and ``run_costs`` row belongs to a run of the ``runs`` dataset, and —
  where the study's plan is given — the ``runs`` dataset holds exactly the planned runs;
* evaluation errors (``timeout``, ``error``) under ``evaluation.on_error: fail`` stop here,
  naming the runs and the one command that redoes just their evaluation.

Duplicate keys are refused earlier, when a dataset is read (:func:`forgetting.records.schemas.read_dataset`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from forgetting.foundation.errors import RunOutputError
from forgetting.records.eval_report import STATUSES, is_eval_error

#: how many runs an error line names before "and N more"
SHOWN = 5


@dataclass(frozen=True)
class EvalError:
    """A run whose evaluation gave no verdict."""

    run_id: str
    task: str
    status: str


def _present(runs: pa.Table) -> list[dict[str, object]]:
    rows = runs.select(["run_id", "task", "status", "eval_status"]).to_pylist()
    return [r for r in rows if r["status"] != "missing"]


def check_eval_statuses(runs: pa.Table) -> None:
    """Every present run carries an evaluation status the pipeline knows."""
    for r in _present(runs):
        if r["eval_status"] not in STATUSES:
            raise RunOutputError(
                f"runs dataset: run {r['run_id']} has eval_status {r['eval_status']!r}, not an evaluation "
                f"status ({', '.join(STATUSES)}); analyse and collect it again"
            )


def eval_errors(runs: pa.Table) -> list[EvalError]:
    """The present runs whose evaluation errored, in dataset order."""
    return [
        EvalError(str(r["run_id"]), str(r["task"]), str(r["eval_status"]))
        for r in _present(runs)
        if is_eval_error(r["eval_status"])  # type: ignore[arg-type]
    ]


def _listing(items: Sequence[str]) -> str:
    shown = ", ".join(items[:SHOWN])
    return shown + (f" and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def eval_errors_message(errors: Sequence[EvalError], n_runs: int, redo: str | None) -> str:
    """The one line with which ``evaluation.on_error: fail`` stops the statistics."""
    runs = _listing([f"{e.run_id} ({e.status})" for e in errors])
    tasks = sorted({e.task for e in errors})
    how = f"`{redo}`" if redo else "`forgetting evaluate --errored --config CONFIG`"
    return (
        f"stats: {len(errors)} of {n_runs} evaluations errored (timeout or harness error: no verdict on "
        f"the patch) on instance(s) {_listing(tasks)}: {runs}; redo just their evaluation with {how}, "
        "then rerun the workflow; or set evaluation.on_error: exclude or unresolved"
    )


def check_run_ids(runs: pa.Table, table: pa.Table | None, name: str) -> None:
    """Every row of ``table`` (``tool_calls``, ``run_costs``) belongs to a run of ``runs``."""
    if table is None or table.num_rows == 0:
        return
    ids = table.column("run_id")
    outside = pc.invert(pc.is_in(ids, value_set=runs.column("run_id")))
    if pc.any(outside).as_py():
        stray = ids.filter(outside)
        first = stray[0].as_py()
        raise RunOutputError(
            f"{name} dataset: {len(pc.unique(stray))} run id(s) that are not in the runs dataset "
            f"(e.g. {first!r}); collect the datasets again"
        )


def check_against_plan(runs: pa.Table, planned: Sequence[str]) -> None:
    """The ``runs`` dataset holds exactly the planned runs (collection writes a row for each)."""
    have = runs.column("run_id")
    plan = pa.array(list(planned), pa.string())
    unknown = have.filter(pc.invert(pc.is_in(have, value_set=plan)))
    if len(unknown):
        raise RunOutputError(
            f"runs dataset: {len(unknown)} run(s) that are not in the study's plan (e.g. "
            f"{unknown[0].as_py()!r}): datasets of another config? collect them again"
        )
    absent = plan.filter(pc.invert(pc.is_in(plan, value_set=have)))
    if len(absent):
        raise RunOutputError(
            f"runs dataset: {len(absent)} planned run(s) without a row (e.g. {absent[0].as_py()!r}); "
            "collect the datasets again"
        )
