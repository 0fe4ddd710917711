"""The workflow's entry (evaluate_batch), the evaluate and dataset commands, the instance
rows and the atomic eval.json — on a demo-kind study of the fixture task."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from forgetting import cli
from forgetting.evaluate import evaluate_batch, load_instances, read_report
from forgetting.foundation.errors import ConfigError, ResourceError
from forgetting.records.eval_report import EvalReport, write_report
from forgetting.study.config import load_study
from forgetting.study.plan import plan_batches
from forgetting_testkit import evaltask
from forgetting_testkit.checkout import ROOT, cli_env
from forgetting_testkit.evaltask import make_run


def mtimes(dirs):
    return {d.name: (d / "eval.json").stat().st_mtime_ns for d in dirs if (d / "eval.json").exists()}


def test_batch_evaluates_finished_runs_once_and_writes_the_manifest(study_file, tmp_path):
    study = load_study(study_file)
    (batch,) = plan_batches(study)
    runs = batch.runs
    dirs = [
        make_run(study, runs[0], evaltask.patch("gold")),
        make_run(study, runs[1], ""),
        make_run(study, runs[2], evaltask.patch("wrong")),
        make_run(study, runs[3], evaltask.patch("stale")),
        make_run(study, runs[4], evaltask.patch("gold"), finished=False),
    ]
    manifest, log = tmp_path / "eval-manifest.json", tmp_path / "evaluate.log"
    evaluate_batch(study, batch, manifest=manifest, log=log)
    doc = json.loads(manifest.read_text())
    assert doc["runs"] == {
        runs[0].run_id: {"status": "resolved", "resolved": True},
        runs[1].run_id: {"status": "empty_patch", "resolved": False},
        runs[2].run_id: {"status": "unresolved", "resolved": False},
        runs[3].run_id: {"status": "patch_failed", "resolved": False},
        runs[4].run_id: {"status": "not_run", "resolved": False},
    }
    assert doc["summary"] == {
        "runs": 5,
        "resolved": 1,
        "statuses": {"empty_patch": 1, "not_run": 1, "patch_failed": 1, "resolved": 1, "unresolved": 1},
    }
    assert (doc["batch"], doc["backend"]) == (batch.key, "local")
    assert read_report(dirs[0] / "eval.json").run_id == runs[0].run_id
    assert not (dirs[4] / "eval.json").exists()
    assert "evaluating 4 of 5 runs with the local backend" in log.read_text()

    # a second call evaluates nothing: every eval.json is current
    before = mtimes(dirs)
    evaluate_batch(study, batch, manifest=manifest, log=log)
    assert mtimes(dirs) == before and json.loads(manifest.read_text()) == doc
    assert f"{runs[0].run_id}: resolved (evaluated before)" in log.read_text()

    # a changed patch, an interrupted evaluation (eval/ left, no eval.json) and an error are redone
    (dirs[2] / "patch.diff").write_text(evaltask.patch("gold"))
    (dirs[0] / "eval.json").unlink()
    old = read_report(dirs[3] / "eval.json")
    old.status, old.error = "error", "harness crashed"
    write_report(dirs[3] / "eval.json", old)
    before = mtimes(dirs)
    evaluate_batch(study, batch, manifest=manifest, log=log)
    after = mtimes(dirs)
    assert after["2"] == before["2"]  # the empty patch was kept
    assert after["3"] != before["3"] and after["4"] != before["4"] and "1" in after
    doc = json.loads(manifest.read_text())
    assert doc["runs"][runs[2].run_id]["status"] == "resolved"
    assert doc["runs"][runs[3].run_id]["status"] == "patch_failed"
    assert doc["summary"]["resolved"] == 2


def test_eval_json_is_written_atomically(tmp_path, monkeypatch):
    path = tmp_path / "eval.json"
    write_report(path, EvalReport("x", "local", "resolved", True, "abc"))
    original = path.read_bytes()
    real_write = pathlib.Path.write_bytes

    def half_then_crash(self, data):
        real_write(self, data[: len(data) // 2])
        raise OSError("disk full")

    monkeypatch.setattr(pathlib.Path, "write_bytes", half_then_crash)
    with pytest.raises(OSError, match="disk full"):
        write_report(path, EvalReport("x", "local", "unresolved", False, "def"))
    monkeypatch.undo()
    assert path.read_bytes() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval.json"]  # no temporary file left


def test_report_status_must_agree_with_resolved():
    with pytest.raises(ValueError, match="contradicts"):
        EvalReport("x", "local", "unresolved", True, "abc")
    with pytest.raises(ValueError, match="unknown evaluation status"):
        EvalReport("x", "local", "passed", False, "abc")


def test_cli_evaluates_a_run_directory_and_an_ad_hoc_patch(study_file, tmp_path, capsys):
    study = load_study(study_file)
    run = plan_batches(study)[0].runs[0]
    run_dir = make_run(study, run, evaltask.patch("gold"))
    assert cli.main(["evaluate", str(run_dir), "--config", str(study_file)]) == 0
    out = capsys.readouterr().out
    assert out == f"{run.run_id}: resolved (FAIL_TO_PASS 2/2, PASS_TO_PASS 2/2) -> {run_dir / 'eval.json'}\n"

    patch = tmp_path / "adhoc" / "wrong.diff"
    patch.parent.mkdir()
    patch.write_text(evaltask.patch("wrong"))
    args = ["evaluate", "--patch", str(patch), "--instance", "demo__calc-1", "--config", str(study_file)]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("demo__calc-1: unresolved (FAIL_TO_PASS 0/2, PASS_TO_PASS 2/2)")
    assert read_report(patch.parent / "eval.json").status == "unresolved"

    unfinished = make_run(study, plan_batches(study)[0].runs[1], "x", finished=False)
    assert cli.main(["evaluate", str(unfinished), "--config", str(study_file)]) == 2
    assert capsys.readouterr().err == f"error: {unfinished}: no run.json; the run has not finished\n"


def swebench_study(tmp_path: Path, instances: Path, backend: str = "docker"):
    known = tmp_path / "known.txt"
    known.write_text("demo__calc-1\nother__repo-2\n")
    config = {
        "study": {"name": "s", "seed": 1, "results_dir": str(tmp_path / "results")},
        "agents": ["mini"],
        "tasks": {"ids": ["demo__calc-1", "other__repo-2"]},
        "dataset": {"kind": "swebench", "known_ids": str(known), "instances": str(instances)},
        "configurations": {"names": "none"},
        "model": {"backend": "scripted", "name": "scripted"},
        "evaluation": {"backend": backend},
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(config))
    return load_study(path)


def test_load_instances_of_a_swebench_study(tmp_path):
    jsonl = tmp_path / "verified.jsonl"
    study = swebench_study(tmp_path, jsonl)
    with pytest.raises(
        ResourceError, match=rf"^{jsonl}: SWE-bench instances file not found .*`forgetting dataset fetch"
    ):
        load_instances(study)
    rows = [{"instance_id": "demo__calc-1", "repo": "demo/calc"}, {"instance_id": "zzz__z-9"}]
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ResourceError, match=rf"^{jsonl}: no instance 'other__repo-2'"):
        load_instances(study)
    assert load_instances(study, ["demo__calc-1"]) == {"demo__calc-1": rows[0]}
    jsonl.write_text("{not json\n")
    with pytest.raises(ResourceError, match=rf"^{jsonl}: line 1 is not valid JSON"):
        load_instances(study, ["demo__calc-1"])


def test_local_backend_refuses_swebench_studies(tmp_path):
    from forgetting.evaluate.backends import make_backend

    study = swebench_study(tmp_path, tmp_path / "x.jsonl", backend="local")
    with pytest.raises(ConfigError, match="'local' evaluates the demo tasks only"):
        make_backend(study.evaluation, study)


def test_bad_evaluation_keys_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"evaluation.apptainer.*executabel"):
        study = swebench_study(tmp_path, tmp_path / "x.jsonl")
        raw = yaml.safe_load((tmp_path / "study.yaml").read_text())
        raw["evaluation"]["apptainer"] = {"executabel": "apptainer"}
        (tmp_path / "study.yaml").write_text(yaml.safe_dump(raw))
        load_study(tmp_path / "study.yaml")
    assert study.evaluation.apptainer.writable_layer_mib == 8192


def test_dataset_fetch_offline_is_one_line(tmp_path):
    env = cli_env({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")})
    out = tmp_path / "verified.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "forgetting", "dataset", "fetch", "--out", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(
        "error: dataset fetch: cannot download SWE-bench/SWE-bench_Verified (split test)"
    )
    assert proc.stderr.count("\n") == 1 and str(out) in proc.stderr
    assert not out.exists()
