"""Grading a test log with swebench's own code (swebench 5.0.2, pinned in pyproject).

Nothing here re-implements swebench: the log parser comes from its ``PARSER_REGISTRY``,
test results from ``get_logs_eval`` (which needs the ``>>>>> Start Test Output`` /
``>>>>> End Test Output`` markers), the per-test report from ``get_eval_tests_report`` and
the verdict from ``get_resolution_status`` — the same chain ``get_eval_report`` runs inside
the harness. This module only builds the :class:`swebench.types.TestSpec` those functions
need and turns their answer into one of the report's statuses.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from swebench.harness.constants import (
    APPLY_PATCH_FAIL,
    APPLY_PATCH_PASS,
    END_TEST_OUTPUT,
    FAIL_TO_PASS,
    PASS_TO_PASS,
    START_TEST_OUTPUT,
    EvalType,
    ResolvedStatus,
)
from swebench.harness.grading import get_eval_tests_report, get_logs_eval, get_resolution_status
from swebench.harness.infra_failure import TIER_ENVIRONMENT, classify_logs, classify_text
from swebench.harness.log_parsers import PARSER_REGISTRY
from swebench.harness.log_parsers.python import MAP_REPO_TO_PARSER_PY
from swebench.harness.utils import make_test_spec
from swebench.types import TestSpec

from forgetting.foundation.errors import ResourceError
from forgetting.instances.record import lacking_message, missing_harness_fields


def parse_test_ids(value: Any) -> list[str]:
    """FAIL_TO_PASS / PASS_TO_PASS: a JSON string in the Hugging Face rows, a list elsewhere."""
    if isinstance(value, str):
        value = json.loads(value)
    return [str(v) for v in value or []]


def require_harness_fields(
    instances: Mapping[str, Mapping[str, Any]], *, backend: str, optional: Sequence[str] = ()
) -> None:
    """A one-line error naming the first row that lacks what ``backend`` needs: the row, the
    fields, the stage, and which dataset to load instead."""
    for instance_id, row in instances.items():
        lacking = [f for f in missing_harness_fields(row) if f not in optional]
        if lacking:
            raise ResourceError(lacking_message(instance_id, row, lacking, f"the {backend} evaluation"))


def repository_parser(repo: str | None) -> str | None:
    """The name (in ``PARSER_REGISTRY``) of swebench's log parser for ``repo`` — its
    ``MAP_REPO_TO_PARSER_PY``, the parser the harness used for that repository before the rows
    named theirs (classic rows name none). Aliases share one function, so any name of it grades
    alike; the first registered is taken."""
    function = MAP_REPO_TO_PARSER_PY.get(repo or "")
    if function is None:
        return None
    return next(name for name, f in PARSER_REGISTRY.items() if f is function)


def spec_for(
    instance: Mapping[str, Any],
    *,
    eval_script_list: Sequence[str] | None = None,
    default_log_parser: str | None = None,
) -> TestSpec:
    """The swebench TestSpec of ``instance``.

    A full swebench 5.x row goes through swebench's own ``make_test_spec``. Other rows (the
    demo tasks, classic rows used for grading only) get a TestSpec built by hand from the
    fields they have: ``eval_script_list`` is the script the caller runs; the log parser is the
    row's, else swebench's for the row's repository (:func:`repository_parser`), else
    ``default_log_parser``; the evaluation type defaults to swebench's ``pass_and_fail``.
    """
    if eval_script_list is None and not missing_harness_fields(instance):
        return make_test_spec(dict(instance))
    lacking = [f for f in (FAIL_TO_PASS, PASS_TO_PASS) if instance.get(f) is None]
    if lacking:  # no test list is not an empty one: it would grade anything resolved
        raise ResourceError(lacking_message(str(instance.get("instance_id")), instance, lacking, "grading"))
    log_parser = instance.get("log_parser") or repository_parser(instance.get("repo")) or default_log_parser
    if not log_parser:
        raise ValueError(f"instance {instance.get('instance_id')!r} names no log_parser")
    if log_parser not in PARSER_REGISTRY:
        raise ValueError(f"instance {instance.get('instance_id')!r}: unknown log_parser {log_parser!r}")
    return TestSpec(
        instance_id=str(instance["instance_id"]),
        image=str(instance.get("image") or ""),
        eval_script_list=list(eval_script_list or []),
        repo=str(instance.get("repo", "")),
        version=str(instance.get("version", "")),
        FAIL_TO_PASS=parse_test_ids(instance.get("FAIL_TO_PASS")),
        PASS_TO_PASS=parse_test_ids(instance.get("PASS_TO_PASS")),
        log_parser=log_parser,
        eval_type=str(instance.get("eval_type") or EvalType.PASS_AND_FAIL.value),
    )


@dataclass(frozen=True)
class Grade:
    """swebench's verdict on one test log."""

    #: ``get_logs_eval`` found test results (False: none, or the log contradicts itself)
    tests_parsed: bool
    status_map: dict[str, str]
    #: FAIL_TO_PASS / PASS_TO_PASS → {"success": [...], "failure": [...]}
    tests: dict[str, dict[str, list[str]]]
    resolution: str

    @property
    def resolved(self) -> bool:
        return self.tests_parsed and self.resolution == ResolvedStatus.FULL.value


def grade_log(spec: TestSpec, log_path: str | os.PathLike[str]) -> Grade:
    """Grade a test log as the harness does in ``get_eval_report``."""
    status_map, found = get_logs_eval(spec, str(log_path))
    report = get_eval_tests_report(
        status_map,
        {"instance_id": spec.instance_id, FAIL_TO_PASS: spec.FAIL_TO_PASS, PASS_TO_PASS: spec.PASS_TO_PASS},
        eval_type=EvalType(spec.eval_type),
    )
    resolution = get_resolution_status(report) if found else ResolvedStatus.NO.value
    tests = {
        kind: {"success": list(report[kind]["success"]), "failure": list(report[kind]["failure"])}
        for kind in (FAIL_TO_PASS, PASS_TO_PASS)
    }
    return Grade(tests_parsed=found, status_map=dict(status_map), tests=tests, resolution=resolution)


#: infrastructure failures a test log shows that swebench's own signatures
#: (``swebench.harness.infra_failure``, its environment tier) lack: a full writable layer, a
#: process bash reports killed (the out-of-memory killer, a limit), Apptainer's own ``FATAL:``
#: line (an image missing, a bind refused) — the container broke, not the patch
INFRA_SIGNATURES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("no_space_left", re.compile(r"No space left on device|\[Errno 28\]|\bENOSPC\b")),
    ("killed", re.compile(r"^(?:.*: line \d+:\s+\d+\s+)?Killed\b", re.MULTILINE)),
    ("apptainer_failed", re.compile(r"^FATAL:\s", re.MULTILINE)),
)


def infra_failure(text: str) -> str | None:
    """The reason a log shows the environment broke (``no_space_left``, ``killed``,
    ``apptainer_failed``, or swebench's environment-tier reasons such as ``out_of_memory``),
    else None."""
    for reason, pattern in INFRA_SIGNATURES:
        if pattern.search(text):
            return reason
    found = classify_text(text)
    return found[0] if found and found[1] == TIER_ENVIRONMENT else None


@dataclass(frozen=True)
class LogVerdict:
    status: str
    patch_applied: bool | None
    grade: Grade | None
    note: str | None = None


def verdict_from_log(spec: TestSpec, log_path: Path, *, timed_out: bool) -> LogVerdict:
    """The report status of a finished (or killed) eval run whose output is ``log_path``.

    A log that shows the environment broke (:func:`infra_failure`: no space left, a process
    killed, Apptainer's own failure) is an evaluation error whatever else it says;
    a patch that does not apply is marked by swebench's ``>>>>> Patch Apply Failed`` line;
    a log without both test-output markers means the tests never ran, or that the log is cut
    short after they started (an evaluation error either way, never "unresolved");
    tests that ran but left nothing swebench can read count as unresolved, as in swebench.
    """
    text = log_path.read_text(encoding="utf-8", errors="replace") if log_path.is_file() else ""
    broke = infra_failure(text)
    if broke is not None and not timed_out:  # an evaluation error, never "unresolved" or "patch failed"
        applied = True if APPLY_PATCH_PASS in text else None
        return LogVerdict("error", applied, None, note=f"infrastructure failure in the log: {broke}")
    if APPLY_PATCH_FAIL in text:
        return LogVerdict("patch_failed", False, None)
    if timed_out:
        return LogVerdict("timeout", True, grade_log(spec, log_path) if log_path.is_file() else None)
    if START_TEST_OUTPUT not in text or END_TEST_OUTPUT not in text:
        applied = True if APPLY_PATCH_PASS in text else None
        note = (
            f"the log is cut short: the tests started but the log ends before {END_TEST_OUTPUT!r}"
            if START_TEST_OUTPUT in text
            else "the tests never ran: no test-output markers in the log"
        )
        return LogVerdict("error", applied, None, note=note)
    grade = grade_log(spec, log_path)
    note = None
    if not grade.tests_parsed:
        found = classify_logs(str(log_path))
        reason = f" ({found[0]})" if found else ""
        note = f"swebench found no usable test results in the log{reason}"
    return LogVerdict("resolved" if grade.resolved else "unresolved", True, grade, note)
