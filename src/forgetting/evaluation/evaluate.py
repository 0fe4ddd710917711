"""One evaluation: a patch on an instance, through a backend, into ``eval.json``."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from forgetting.evaluation.backends import Backend, Outcome
from forgetting.evaluation.report import EvalReport, empty_tests, patch_digest, write_report
from forgetting.layout import EVAL_DIR, EVAL_JSON, PATCH


def swebench_version() -> str | None:
    try:
        return version("swebench")
    except PackageNotFoundError:
        return None


def read_patch(run_dir: Path) -> str:
    """The run's submitted patch; a missing ``patch.diff`` is an empty patch."""
    path = run_dir / PATCH
    return path.read_bytes().decode("utf-8", errors="replace") if path.is_file() else ""


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
    shutil.rmtree(work_dir, ignore_errors=True)
    if not patch.strip():
        outcome = Outcome("empty_patch", None)
    else:
        work_dir.mkdir(parents=True)
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
