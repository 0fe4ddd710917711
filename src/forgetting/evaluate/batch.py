"""The workflow's entry: evaluate every finished run of a batch that needs it."""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from forgetting.evaluate.backends import make_backend
from forgetting.evaluate.evaluate import evaluate_patch, read_patch, swebench_version
from forgetting.foundation.atomic import write_json
from forgetting.foundation.errors import RunOutputError
from forgetting.foundation.faults import checkpoint
from forgetting.foundation.inputs import linked_problem, stored_problem
from forgetting.foundation.layout import EVAL_JSON, PATCH, RUN_JSON, Layout
from forgetting.foundation.seeds import bytes_hex
from forgetting.instances.load import load_available
from forgetting.records import is_finished, read_run_record
from forgetting.records.eval_report import EvalReport, is_current, read_report, write_report
from forgetting.study.config import Study
from forgetting.study.plan import Batch, Run

#: manifest status of a planned run that has no finished run.json (it is not evaluated)
NOT_RUN = "not_run"
#: manifest status of a finished run left without a readable eval.json by an ``only`` evaluation
NOT_EVALUATED = "not_evaluated"


class BatchLog:
    """Progress lines for the Snakemake log (thread-safe; appends)."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = Path(path) if path else None
        self.lock = threading.Lock()
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def __call__(self, line: str) -> None:
        if self.path is None:
            return
        with self.lock, open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line.rstrip("\n") + "\n")


def _entry(report: EvalReport) -> dict[str, Any]:
    return {"status": report.status, "resolved": report.resolved}


def _standing_entry(run_dir: Path) -> dict[str, Any]:
    """The manifest entry of a run left as it is: its report, else why it has none."""
    if not is_finished(run_dir):
        return {"status": NOT_RUN, "resolved": False}
    report = read_report(run_dir / EVAL_JSON)
    return _entry(report) if report is not None else {"status": NOT_EVALUATED, "resolved": False}


def check_run_record(run_dir: Path, run_id: str) -> None:
    """A finished run's ``run.json`` read whole before its patch is evaluated: one of the wrong
    shape, or another run's, is a :class:`RunOutputError` naming the file (not evaluated anyway)."""
    record = read_run_record(run_dir / RUN_JSON)
    if record.run_id != run_id:
        raise RunOutputError(f"{run_dir / RUN_JSON}: the record of run {record.run_id!r}, not of {run_id!r}; "
                             "a run directory copied or moved: rerun the run")


def _error_report(run: Run, run_dir: Path, backend: str, reason: str) -> EvalReport:
    """An ``error`` report for a run that cannot be evaluated (its patch or its dataset row)."""
    path = run_dir / PATCH
    digest = bytes_hex(path.read_bytes() if stored_problem(path) is None and path.is_file() else b"")
    report = EvalReport(instance_id=run.task, backend=backend, status="error", resolved=False,
                        patch_sha256=digest, error=reason, run_id=run.run_id, swebench=swebench_version())
    if linked_problem(run_dir / EVAL_JSON) is None:  # never written through a link out of the results
        write_report(run_dir / EVAL_JSON, report)
    return report


def evaluate_batch(
    study: Study,
    batch: Batch,
    *,
    manifest: str | os.PathLike[str],
    log: str | os.PathLike[str] | None = None,
    only: Collection[str] | None = None,
) -> dict[str, Any]:
    """Evaluate the runs of ``batch`` and write the batch manifest (atomically).

    A run is evaluated when it has a finished ``run.json`` and no current ``eval.json`` (one
    for this very patch and backend that is not an evaluation error): finished evaluations are
    kept, interrupted or failed ones are redone. The manifest maps every run id of the batch to
    its ``status`` and ``resolved`` (``not_run`` for a run without ``run.json``).

    ``only`` (run ids) limits the evaluation to those runs: every other run of the batch keeps
    its ``eval.json`` untouched and enters the manifest as it stands (``forgetting evaluate
    --errored`` redoes the evaluation errors this way). The evaluation's settings are the
    study's (``study.evaluation``; a command line's own: a study with those, ``dataclasses.replace``).
    """
    settings = study.evaluation
    layout = Layout(study.results_dir)
    say = BatchLog(log)
    entries: dict[str, dict[str, Any]] = {}
    todo: list[tuple[Run, Path, str]] = []
    for run in batch.runs:
        run_dir = layout.run_dir(run.run_id)
        if only is not None and run.run_id not in only:
            entries[run.run_id] = _standing_entry(run_dir)
            continue
        if not is_finished(run_dir):
            entries[run.run_id] = {"status": NOT_RUN, "resolved": False}
            say(f"{run.run_id}: not evaluated, the run has no {RUN_JSON}")
            continue
        try:
            check_run_record(run_dir, run.run_id)
            patch = read_patch(run_dir)
        except RunOutputError as exc:  # this run only: its report says why, the batch goes on
            entries[run.run_id] = _entry(_error_report(run, run_dir, settings.backend, str(exc)))
            say(f"{run.run_id}: error ({exc})")
            continue
        old = read_report(run_dir / EVAL_JSON)
        if old is not None and is_current(old, patch=patch, backend=settings.backend):
            entries[run.run_id] = _entry(old)
            say(f"{run.run_id}: {old.status} (evaluated before)")
            continue
        todo.append((run, run_dir, patch))
    if todo:
        backend = make_backend(settings, study)
        instances, lacking = load_available(study, sorted({run.task for run, _, _ in todo}))
        for run, run_dir, _ in [item for item in todo if item[0].task in lacking]:
            entries[run.run_id] = _entry(_error_report(run, run_dir, settings.backend, lacking[run.task]))
            say(f"{run.run_id}: error ({lacking[run.task]})")
        todo = [item for item in todo if item[0].task not in lacking]
        with_patch = {run.task for run, _, patch in todo if patch.strip()}
        if with_patch:
            backend.check({t: instances[t] for t in sorted(with_patch)})
        say(f"evaluating {len(todo)} of {len(batch.runs)} runs with the {backend.name} backend")

        def one(item: tuple[Run, Path, str]) -> tuple[str, EvalReport]:
            run, run_dir, patch = item
            report = evaluate_patch(
                instances[run.task],
                patch,
                backend,
                out_dir=run_dir,
                timeout_s=settings.timeout_s,
                run_id=run.run_id,
            )
            extra = f" ({report.error or report.note})" if (report.error or report.note) else ""
            say(f"{run.run_id}: {report.status}{extra}")
            checkpoint("evaluate.report")
            return run.run_id, report

        with ThreadPoolExecutor(max_workers=max(1, settings.workers)) as pool:
            for run_id, report in pool.map(one, todo):
                entries[run_id] = _entry(report)
    statuses = Counter(e["status"] for e in entries.values())
    document = {
        "batch": batch.key,
        "backend": settings.backend,
        "runs": entries,
        "summary": {
            "runs": len(entries),
            "resolved": sum(1 for e in entries.values() if e["resolved"]),
            "statuses": dict(sorted(statuses.items())),
        },
    }
    write_json(manifest, document)
    say(f"{document['summary']['resolved']} of {len(entries)} runs resolved -> {manifest}")
    return document
