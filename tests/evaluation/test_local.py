"""The local backend on the fixture task (tests/data/evaltask): tests run for real with
pytest in a scratch repository, graded by swebench's parser."""

from __future__ import annotations

import json

import pytest

from forgetting.evaluate.evaluate import evaluate_patch
from forgetting.evaluate.local import LocalBackend, with_report_flag
from forgetting.study.evaluation import EvalSettings
from forgetting_testkit import evaltask

F2P = ["tests/test_calc.py::test_mean_fraction", "tests/test_rounding.py::test_mean_negative"]
P2P = ["tests/test_calc.py::test_add", "tests/test_calc.py::test_mean_of_equal_values"]


@pytest.fixture(scope="module")
def instance(tmp_path_factory):
    return evaltask.instance(tmp_path_factory.mktemp("evaltask"))


def backend(timeout_s: int = 60) -> LocalBackend:
    return LocalBackend(EvalSettings.from_section({"timeout_s": timeout_s}), checkout=evaltask.checkout)


def evaluate(instance, patch: str, tmp_path, timeout_s: int = 60):
    return evaluate_patch(
        instance, patch, backend(timeout_s), out_dir=tmp_path, timeout_s=timeout_s, run_id="r"
    )


def test_gold_patch_resolves(instance, tmp_path):
    report = evaluate(instance, evaltask.patch("gold"), tmp_path)
    assert (report.status, report.resolved, report.patch_applied) == ("resolved", True, True)
    assert report.tests == {
        "FAIL_TO_PASS": {"success": F2P, "failure": []},
        "PASS_TO_PASS": {"success": P2P, "failure": []},
    }
    assert report.resolution == "RESOLVED_FULL" and report.tests_parsed
    log = (tmp_path / report.log).read_text()
    assert ">>>>> Start Test Output" in log and ">>>>> End Test Output" in log
    assert "PASSED tests/test_rounding.py::test_mean_negative" in log and ">>>>> Test Exit Code: 0" in log
    on_disk = json.loads((tmp_path / "eval.json").read_text())
    assert on_disk["status"] == "resolved" and on_disk["log"] == "eval/test_output.txt"


def test_empty_patch_runs_nothing(instance, tmp_path):
    report = evaluate(instance, "\n  \n", tmp_path)
    assert (report.status, report.resolved, report.log) == ("empty_patch", False, None)
    assert not (tmp_path / "eval").exists()


def test_wrong_patch_is_unresolved(instance, tmp_path):
    report = evaluate(instance, evaltask.patch("wrong"), tmp_path)
    assert (report.status, report.resolved, report.patch_applied) == ("unresolved", False, True)
    assert report.tests["FAIL_TO_PASS"] == {"success": [], "failure": F2P}
    assert report.tests["PASS_TO_PASS"] == {"success": P2P, "failure": []}


def test_fix_that_breaks_another_test_is_unresolved(instance, tmp_path):
    report = evaluate(instance, evaltask.patch("regress"), tmp_path)
    assert report.status == "unresolved"
    assert report.tests["FAIL_TO_PASS"]["failure"] == []
    assert report.tests["PASS_TO_PASS"]["failure"] == ["tests/test_calc.py::test_add"]


def test_patch_creating_the_test_files_cannot_cheat(instance, tmp_path):
    # the patch adds its own tests/test_rounding.py; the test patch's version replaces it
    report = evaluate(instance, evaltask.patch("cheat"), tmp_path)
    assert report.status == "unresolved"
    assert report.tests["FAIL_TO_PASS"]["failure"] == F2P


def test_patch_that_does_not_apply(instance, tmp_path):
    report = evaluate(instance, evaltask.patch("stale"), tmp_path)
    assert (report.status, report.resolved, report.patch_applied) == ("patch_failed", False, False)
    log = (tmp_path / report.log).read_text()
    assert ">>>>> Patch Apply Failed" in log and ">>>>> Start Test Output" not in log


def test_hanging_tests_time_out(instance, tmp_path):
    report = evaluate(instance, evaltask.patch("hang"), tmp_path, timeout_s=2)
    assert (report.status, report.resolved) == ("timeout", False)
    assert 2 <= report.durations["tests_s"] < 30
    assert "Timeout error: 2 seconds exceeded." in (tmp_path / report.log).read_text()


def test_checkout_at_the_wrong_commit_is_an_error(instance, tmp_path):
    report = evaluate({**instance, "base_commit": "0" * 40}, evaltask.patch("gold"), tmp_path)
    assert report.status == "error" and "not at 0000000" in report.error


def test_a_crashing_checkout_is_an_error_status_not_a_crash(instance, tmp_path):
    def broken(instance, dest):
        raise OSError("disk full")

    b = LocalBackend(EvalSettings.from_section(), checkout=broken)
    report = evaluate_patch(instance, evaltask.patch("gold"), b, out_dir=tmp_path)
    assert (report.status, report.error) == ("error", "OSError: disk full")
    assert json.loads((tmp_path / "eval.json").read_text())["status"] == "error"


def test_report_flag_is_added_once():
    assert with_report_flag("python -m pytest") == "python -m pytest -rA"
    assert with_report_flag("python -m pytest -rA -q") == "python -m pytest -rA -q"
