"""Grading a test log through swebench's own code (get_logs_eval, get_eval_tests_report,
get_resolution_status), on canned logs whose verdicts are worked out by hand."""

from __future__ import annotations

import pytest
from swebench.harness.grading import get_eval_report
from swebench.image_builder.image_spec import ImageSpec

from forgetting.evaluate.grading import (
    grade_log,
    require_harness_fields,
    spec_for,
    verdict_from_log,
)
from forgetting.foundation.errors import ResourceError

ROW = {
    "instance_id": "demo__calc-1",
    "repo": "demo/calc",
    "version": "0.1",
    # JSON text, as on the hub, or a list: both are read
    "FAIL_TO_PASS": '["tests/test_a.py::test_one", "tests/test_a.py::test_three[1-2]"]',
    "PASS_TO_PASS": ["tests/test_a.py::test_two", "tests/test_b.py::test_four", "tests/test_b.py::test_five"],
}

HEAD = "+ git apply -v -\nApplied patch tests/test_a.py cleanly.\n"
START, END = ">>>>> Start Test Output", ">>>>> End Test Output"


def log_of(body: str, exit_code: int | None = 1) -> str:
    tail = f">>>>> Test Exit Code: {exit_code}\n" if exit_code is not None else ""
    return f"{HEAD}+ : '{START}'\n{body}+ : '{END}'\n{tail}"


MIXED = """\
============================= test session starts ==============================
collected 5 items
=========================== short test summary info ============================
PASSED tests/test_a.py::test_one
PASSED tests/test_a.py::test_three[1-2]
FAILED tests/test_a.py::test_two - AssertionError: assert 1 == 2
SKIPPED [1] tests/test_b.py:10: needs the network
ERROR tests/test_b.py::test_four - RuntimeError: boom
PASSED tests/test_b.py::test_five
"""


@pytest.fixture
def spec():
    return spec_for(ROW, default_log_parser="parse_log_pytest")


def test_hand_built_spec_reads_json_and_list_test_ids(spec):
    assert spec.FAIL_TO_PASS == ["tests/test_a.py::test_one", "tests/test_a.py::test_three[1-2]"]
    assert spec.PASS_TO_PASS[1] == "tests/test_b.py::test_four"
    assert (spec.log_parser, spec.eval_type) == ("parse_log_pytest", "pass_and_fail")


def test_canned_log_graded_test_by_test(spec, tmp_path):
    log = tmp_path / "test_output.txt"
    log.write_text(log_of(MIXED))
    grade = grade_log(spec, log)
    # by hand: both F2P tests print PASSED; of the P2P tests test_two FAILED, test_four ERROR,
    # test_five PASSED; the "SKIPPED [1]" summary line names no test
    assert grade.tests_parsed
    assert grade.tests["FAIL_TO_PASS"] == {
        "success": ["tests/test_a.py::test_one", "tests/test_a.py::test_three[1-2]"],
        "failure": [],
    }
    assert grade.tests["PASS_TO_PASS"] == {
        "success": ["tests/test_b.py::test_five"],
        "failure": ["tests/test_a.py::test_two", "tests/test_b.py::test_four"],
    }
    assert "[1]" not in grade.status_map
    assert grade.resolution == "RESOLVED_NO" and not grade.resolved
    assert verdict_from_log(spec, log, timed_out=False).status == "unresolved"


def test_all_passing_log_is_resolved_and_agrees_with_get_eval_report(spec, tmp_path):
    body = "".join(f"PASSED {t}\n" for t in spec.FAIL_TO_PASS + spec.PASS_TO_PASS)
    log = tmp_path / "test_output.txt"
    log.write_text(log_of(body, exit_code=0))
    grade = grade_log(spec, log)
    assert grade.resolution == "RESOLVED_FULL" and grade.resolved
    verdict = verdict_from_log(spec, log, timed_out=False)
    assert (verdict.status, verdict.patch_applied) == ("resolved", True)
    harness = get_eval_report(spec, {"instance_id": spec.instance_id, "model_patch": "x"}, str(log), True)
    assert harness[spec.instance_id]["resolved"] is True
    assert harness[spec.instance_id]["tests_status"]["PASS_TO_PASS"] == grade.tests["PASS_TO_PASS"]


def test_half_the_fail_to_pass_tests_is_partial_not_resolved(spec, tmp_path):
    body = f"PASSED {spec.FAIL_TO_PASS[0]}\nFAILED {spec.FAIL_TO_PASS[1]}\n" + "".join(
        f"PASSED {t}\n" for t in spec.PASS_TO_PASS
    )
    log = tmp_path / "test_output.txt"
    log.write_text(log_of(body))
    grade = grade_log(spec, log)
    assert grade.resolution == "RESOLVED_PARTIAL" and not grade.resolved


def test_log_contradicting_its_exit_code_is_not_trusted(spec, tmp_path):
    # every test "PASSED" (a patch can print such lines itself) but pytest exited 1:
    # swebench's get_logs_eval rejects the log, so the run is unresolved
    body = "".join(f"PASSED {t}\n" for t in spec.FAIL_TO_PASS + spec.PASS_TO_PASS)
    log = tmp_path / "test_output.txt"
    log.write_text(log_of(body, exit_code=1))
    verdict = verdict_from_log(spec, log, timed_out=False)
    assert verdict.status == "unresolved" and not verdict.grade.tests_parsed
    assert "no usable test results" in verdict.note


def test_log_without_markers_means_the_tests_never_ran(spec, tmp_path):
    log = tmp_path / "test_output.txt"
    log.write_text(HEAD + "conda: command not found\n")
    verdict = verdict_from_log(spec, log, timed_out=False)
    assert verdict.status == "error" and verdict.grade is None


def test_patch_apply_failure_and_timeout_markers(spec, tmp_path):
    log = tmp_path / "test_output.txt"
    log.write_text("error: patch failed: calc.py:8\n>>>>> Patch Apply Failed\n")
    assert verdict_from_log(spec, log, timed_out=False).status == "patch_failed"
    log.write_text(log_of("PASSED tests/test_a.py::test_one\n") + ">>>>> Tests Timed Out\n")
    verdict = verdict_from_log(spec, log, timed_out=True)
    assert verdict.status == "timeout" and not verdict.grade.resolved


def test_full_swebench5_row_goes_through_make_test_spec():
    row = {
        **ROW,
        "image": ImageSpec(instance_id="demo__calc-1", dockerfile="-", namespace="swebench").name,
        "log_parser": "parse_log_pytest",
        "eval_type": "pass_and_fail",
        "eval_script": f"#!/bin/bash\nset -uxo pipefail\ncd /testbed\n: '{START}'\npytest -rA\n: '{END}'\n",
    }
    spec = spec_for(row)
    # swebench's make_test_spec strips the header and records the test command's exit code
    assert spec.eval_script_list == [
        "cd /testbed",
        f": '{START}'",
        "pytest -rA",
        "SWEBENCH_TEST_EXIT_CODE=$?",
        f": '{END}'",
        'echo ">>>>> Test Exit Code: $SWEBENCH_TEST_EXIT_CODE"',
    ]
    assert spec.image == row["image"]


def test_rows_without_a_parser_or_harness_fields_are_refused():
    with pytest.raises(ValueError, match="names no log_parser"):
        spec_for(ROW)
    with pytest.raises(ValueError, match="unknown log_parser"):
        spec_for({**ROW, "log_parser": "parse_log_nothing"})
    with pytest.raises(
        ResourceError, match=r"demo__calc-1: its dataset row lacks eval_script, log_parser, eval_type"
    ):
        require_harness_fields({"demo__calc-1": ROW}, backend="apptainer", optional=("image",))
