"""The evaluation report of one run (``eval.json`` beside the run), written atomically.

A report says whether the run's patch applied, which FAIL_TO_PASS / PASS_TO_PASS tests
passed, whether the instance is ``resolved`` (SPEC §3) and, in ``status``, what happened:

=============== ==========================================================================
``resolved``     the tests ran and swebench's grading says RESOLVED_FULL
``unresolved``   the tests ran and at least one FAIL_TO_PASS or PASS_TO_PASS test failed
``empty_patch``  the run submitted no patch (nothing is run)
``patch_failed`` the patch does not apply to the base commit
``timeout``      the tests did not finish within ``evaluation.timeout_s``
``error``        the evaluation itself failed (no test output, missing image, crash, …)
=============== ==========================================================================

The first four are outcomes of the run (:data:`OUTCOMES`; a patch that does not apply is not
resolved, as SWE-bench counts it); ``timeout`` and ``error`` are *evaluation errors*
(:data:`EVAL_ERRORS`): the harness, not the patch, gave no verdict. They are never kept as
current (the next evaluation retries them) and ``evaluation.on_error`` decides what the
statistics make of them (docs/evaluation.md).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from forgetting.foundation.atomic import write_json
from forgetting.foundation.errors import UserError
from forgetting.foundation.seeds import text_hex

STATUSES = ("resolved", "unresolved", "empty_patch", "patch_failed", "timeout", "error")
#: statuses that are an outcome of the run's patch
OUTCOMES = ("resolved", "unresolved", "empty_patch", "patch_failed")
#: statuses where the evaluation gave no verdict (harness error, missing image, crashed
#: container, tests past ``evaluation.timeout_s``)
EVAL_ERRORS = ("timeout", "error")
#: bumped when the report's meaning changes, so older reports are redone
REPORT_FORMAT = 1
TEST_KINDS = ("FAIL_TO_PASS", "PASS_TO_PASS")


def patch_digest(patch: str) -> str:
    return text_hex(patch)


def empty_tests() -> dict[str, dict[str, list[str]]]:
    return {kind: {"success": [], "failure": []} for kind in TEST_KINDS}


@dataclass
class EvalReport:
    instance_id: str
    backend: str
    status: str
    resolved: bool
    patch_sha256: str
    patch_applied: bool | None = None
    tests: dict[str, dict[str, list[str]]] = field(default_factory=empty_tests)
    #: swebench's resolution status (RESOLVED_FULL / RESOLVED_PARTIAL / RESOLVED_NO)
    resolution: str | None = None
    #: whether swebench found test results in the log (``get_logs_eval``)
    tests_parsed: bool | None = None
    #: the test log, relative to the report's directory
    log: str | None = None
    durations: dict[str, float] = field(default_factory=dict)
    timeout_s: int | None = None
    error: str | None = None
    note: str | None = None
    run_id: str | None = None
    swebench: str | None = None
    format: int = REPORT_FORMAT

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown evaluation status {self.status!r}")
        if self.resolved != (self.status == "resolved"):
            raise ValueError(f"status {self.status!r} contradicts resolved={self.resolved}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalReport:
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in known})


def write_report(path: str | os.PathLike[str], report: EvalReport) -> None:
    """Write ``eval.json`` atomically: a reader sees the old report or the new one."""
    write_json(path, report.to_dict())


def read_report(path: str | os.PathLike[str]) -> EvalReport | None:
    """The report at ``path``, or None when it is absent or unreadable (then it is redone)."""
    p = Path(path)
    if p.is_symlink():  # never followed: the evaluation is redone, its report replaces the link
        return None
    try:
        return EvalReport.from_dict(json.loads(p.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError, RecursionError):
        return None


def read_checked_report(path: Path) -> dict[str, Any]:
    """The report at ``path`` for the analysis, which needs one: a UserError (one line naming the
    file and what to do) when it is absent, unreadable, not an object, or its status and
    ``resolved`` disagree."""
    what = "evaluation report"
    if not path.is_file():
        raise UserError(f"{path}: {what} not found")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise UserError(f"{path}: {what} is not readable JSON ({exc})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: {what} is not a JSON object")
    status, resolved = data.get("status"), data.get("resolved")
    if status not in STATUSES:
        raise UserError(
            f"{path}: status {status!r} is not an evaluation outcome ({', '.join(STATUSES)}); "
            "delete it and rerun the evaluation"
        )
    if not isinstance(resolved, bool) or resolved != (status == "resolved"):
        raise UserError(
            f"{path}: resolved {resolved!r} contradicts status {status!r}; delete it and rerun the evaluation"
        )
    return data


def is_current(report: EvalReport | None, *, patch: str, backend: str) -> bool:
    """True when ``report`` evaluated this very patch with this backend and may be kept.

    Evaluation errors (``timeout``, ``error``) are never current: they are retried on the next call.
    """
    return (
        report is not None
        and report.format == REPORT_FORMAT
        and report.backend == backend
        and report.patch_sha256 == patch_digest(patch)
        and report.status not in EVAL_ERRORS
    )


def is_eval_error(status: str | None) -> bool:
    """Whether an evaluation status is an evaluation error rather than an outcome of the run."""
    return status in EVAL_ERRORS
