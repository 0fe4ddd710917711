"""One evaluation: a patch on an instance, through a backend, into ``eval.json``."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from forgetting.evaluate.backends import Backend, Outcome
from forgetting.foundation.errors import RunOutputError
from forgetting.foundation.faults import checkpoint
from forgetting.foundation.inputs import read_stored
from forgetting.foundation.layout import EVAL_DIR, EVAL_JSON, PATCH
from forgetting.records.eval_report import EvalReport, empty_tests, patch_digest, write_report


def swebench_version() -> str | None:
    try:
        return version("swebench")
    except PackageNotFoundError:
        return None


def read_patch(run_dir: Path) -> str:
    """The run's submitted patch; a missing ``patch.diff`` is an empty patch (see
    :func:`read_patch_file`). A ``patch.diff`` that is a symbolic link (or no regular file) is
    a one-line :class:`RunOutputError` naming it: a link is never followed out of the results
    tree, so what it points to never reaches ``eval/patch.diff``."""
    path = run_dir / PATCH
    if not os.path.lexists(path):
        return ""
    return read_patch_file(path, stored=True)


def read_patch_file(path: Path, *, stored: bool = False) -> str:
    """A patch file's text. A patch is text: one with a NUL byte or bytes that are not UTF-8
    is a one-line :class:`RunOutputError` naming the file (the evaluation of that run ends as
    ``error``); binary file changes reach a patch as ``git diff --binary`` text, never as raw
    bytes. ``stored``: the file is a run's (:func:`forgetting.foundation.inputs.read_stored`)."""
    data = read_stored(path, what="patch") if stored else path.read_bytes()
    nul = data.find(b"\0")
    if nul >= 0:
        raise RunOutputError(f"{path}: binary content (a NUL byte at offset {nul}); a patch must be text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RunOutputError(
            f"{path}: binary content (not UTF-8 at offset {exc.start}); a patch must be text"
        ) from None


def _one_line(text: str) -> str:
    return " ".join(text.split())[:500]


def evaluate_patch(
    instance: Mapping[str, Any],
    patch: str,
    backend: Backend,
    *,
    out_dir: Path,
    timeout_s: int | None = None,
    run_id: str | None = None,
) -> EvalReport:
    """Evaluate ``patch`` on ``instance`` and write ``out_dir/eval.json``.

    Work files and the test log go to ``out_dir/eval/`` (replaced on every evaluation).
    Nothing a patch or a backend does raises from here: an empty patch, a patch that does
    not apply, tests that hang and backend failures each end as a report ``status``.
    """
    instance_id = str(instance["instance_id"])
    work_dir = out_dir / EVAL_DIR
    if work_dir.is_symlink():  # never written through: the work files stay in the run directory
        work_dir.unlink()
    shutil.rmtree(work_dir, ignore_errors=True)
    if not patch.strip():
        outcome = Outcome("empty_patch", None)
    else:
        work_dir.mkdir(parents=True)
        checkpoint("evaluate.started")
        try:
            outcome = backend.evaluate(instance, patch, work_dir=work_dir, label=run_id or instance_id)
        except Exception as exc:  # a harness failure is a status, never a crash of the workflow
            outcome = Outcome("error", None, error=_one_line(f"{type(exc).__name__}: {exc}"))
    grade = outcome.grade
    log = None
    if outcome.log_path is not None and outcome.log_path.is_file():
        log = outcome.log_path.relative_to(out_dir).as_posix()
    report = EvalReport(
        instance_id=instance_id,
        backend=backend.name,
        status=outcome.status,
        resolved=outcome.status == "resolved",
        patch_sha256=patch_digest(patch),
        patch_applied=outcome.patch_applied,
        tests=grade.tests if grade else empty_tests(),
        resolution=grade.resolution if grade else None,
        tests_parsed=grade.tests_parsed if grade else None,
        log=log,
        durations=outcome.durations,
        timeout_s=timeout_s,
        error=outcome.error or (outcome.note if outcome.status == "error" else None),
        note=outcome.note,
        run_id=run_id,
        swebench=swebench_version(),
    )
    write_report(out_dir / EVAL_JSON, report)
    return report
