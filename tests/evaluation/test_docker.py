"""The docker backend: swebench's harness as its users run it. No Docker engine here: the
harness command and predictions file are asserted, the real harness is run until it needs
the engine, and its logs are read back from a tree of the shape it leaves."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from swebench.harness.grading import get_eval_report

from forgetting.evaluate.docker_harness import (
    DockerBackend,
    collect,
    harness_command,
    harness_log_dir,
    harness_run_id,
    require_engine,
    write_predictions,
)
from forgetting.evaluate.evaluate import evaluate_patch
from forgetting.evaluate.grading import spec_for
from forgetting.foundation.errors import ResourceError, UserError
from forgetting.study.evaluation import EvalSettings
from forgetting_testkit import evaltask

RUN_ID = "mini/baseline/demo__calc-1/1"


@pytest.fixture(scope="module")
def row(tmp_path_factory):
    return evaltask.swebench_row(tmp_path_factory.mktemp("row"))


@pytest.fixture
def no_engine(tmp_path, monkeypatch):
    host = f"unix://{tmp_path}/no-docker.sock"
    monkeypatch.setenv("DOCKER_HOST", host)
    return host


def test_harness_command_exactly(tmp_path):
    cmd = harness_command(
        python="/venv/bin/python",
        instances_file=Path("/r/eval/instance.jsonl"),
        instance_id="django__django-11099",
        predictions_file=Path("/r/eval/predictions.jsonl"),
        run_id=harness_run_id("mini/baseline/django__django-11099/1"),
        timeout_s=1800,
        report_dir=Path("/r/eval"),
    )
    assert cmd == [
        "/venv/bin/python", "-m", "swebench.harness.run_evaluation",
        "--dataset_name", "/r/eval/instance.jsonl",
        "--split", "test",
        "--instance_ids", "django__django-11099",
        "--predictions_path", "/r/eval/predictions.jsonl",
        "--max_workers", "1",
        "--timeout", "1800",
        "--run_id", "mini.baseline.django__django-11099.1",
        "--report_dir", "/r/eval",
    ]  # fmt: skip


def test_predictions_file(tmp_path):
    write_predictions(tmp_path / "p.jsonl", "django__django-11099", "diff --git a/x b/x\n", "forgetting")
    lines = (tmp_path / "p.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [
        {
            "instance_id": "django__django-11099",
            "model_name_or_path": "forgetting",
            "model_patch": "diff --git a/x b/x\n",
        }
    ]


def test_missing_engine_is_named(no_engine):
    with pytest.raises(
        UserError, match=rf"evaluation.backend docker: no Docker engine reachable at {no_engine}"
    ):
        require_engine()


def test_check_names_rows_lacking_harness_fields_before_the_engine(row, no_engine):
    backend = DockerBackend(EvalSettings.from_section({"backend": "docker"}))
    classic = {k: v for k, v in row.items() if k not in ("image", "eval_script", "log_parser", "eval_type")}
    with pytest.raises(ResourceError, match="lacks image, eval_script, log_parser, eval_type"):
        backend.check({"demo__calc-1": classic})
    with pytest.raises(UserError, match="no Docker engine"):
        backend.check({"demo__calc-1": row})


def test_real_harness_accepts_the_files_and_stops_at_the_engine(row, tmp_path, no_engine):
    backend = DockerBackend(EvalSettings.from_section({"backend": "docker", "docker": {"python": sys.executable}}))
    report = evaluate_patch(row, evaltask.patch("gold"), backend, out_dir=tmp_path, run_id=RUN_ID)
    work = tmp_path / "eval"
    # the harness parsed our arguments, read the predictions and the instance file, recorded
    # the run, then needed the engine
    recorded = json.loads((work / "logs/run_evaluation/mini.baseline.demo__calc-1.1/run.json").read_text())
    assert recorded["dataset"] == str(work / "instance.jsonl")
    assert report.status == "error" and "DockerException" in report.error
    assert json.loads((work / "instance.jsonl").read_text())["eval_script"] == row["eval_script"]


def harness_tree(
    tmp_path: Path, row: dict, *, report: bool, test_output: str | None, instance_log: str
) -> Path:
    logs = harness_log_dir(tmp_path, "r1", "forgetting", row["instance_id"])
    logs.mkdir(parents=True)
    (logs / "run_instance.log").write_text(instance_log)
    if test_output is not None:
        (logs / "test_output.txt").write_text(test_output)
    if report:  # written by swebench's own get_eval_report, as run_instance does
        spec = spec_for(row)
        pred = {"instance_id": row["instance_id"], "model_patch": "x"}
        verdict = get_eval_report(spec, pred, str(logs / "test_output.txt"), include_tests_status=True)
        (logs / "report.json").write_text(json.dumps(verdict))
    return logs


def test_collect_a_finished_harness_run(row, tmp_path):
    spec = spec_for(row)
    passing = "".join(f"PASSED {t}\n" for t in spec.FAIL_TO_PASS + spec.PASS_TO_PASS)
    out = f"+ : '>>>>> Start Test Output'\n{passing}+ : '>>>>> End Test Output'\n>>>>> Test Exit Code: 0\n"
    logs = harness_tree(tmp_path, row, report=True, test_output=out, instance_log=">>>>> Applied Patch:\n")
    outcome = collect(tmp_path, instance=row, run_id="r1", model="forgetting")
    assert (outcome.status, outcome.patch_applied, outcome.log_path) == (
        "resolved",
        True,
        logs / "test_output.txt",
    )
    assert outcome.grade.tests["FAIL_TO_PASS"]["success"] == spec.FAIL_TO_PASS and outcome.note is None


def test_collect_patch_failure_timeout_and_error(row, tmp_path):
    harness_tree(
        tmp_path / "a", row, report=False, test_output=None, instance_log=">>>>> Patch Apply Failed:\nx\n"
    )
    assert collect(tmp_path / "a", instance=row, run_id="r1", model="forgetting").status == "patch_failed"
    harness_tree(
        tmp_path / "b",
        row,
        report=False,
        test_output="...\n\nTimeout error: 5 seconds exceeded.",
        instance_log="",
    )
    assert collect(tmp_path / "b", instance=row, run_id="r1", model="forgetting").status == "timeout"
    harness_tree(
        tmp_path / "c", row, report=False, test_output=None, instance_log="Error creating container: boom\n"
    )
    outcome = collect(tmp_path / "c", instance=row, run_id="r1", model="forgetting")
    assert outcome.status == "error" and outcome.error.endswith("Error creating container: boom")
