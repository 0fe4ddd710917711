"""Batches of real mini-swe-agent runs (both message styles) on real demo tasks, through the
deletion proxy, against the scripted stand-in model: the finished run directory, resuming,
forced reruns, and what a run under 100 % tool-output deletion does that the baseline does not.
"""

from __future__ import annotations

import json
import subprocess

import minisweagent
import pytest

from forgetting.behaviour import label_run
from forgetting.demo.tasks import checkout
from forgetting.foundation.layout import AGENT_LOG, CALLS, PATCH, RUN_JSON, TRAJECTORY, Layout
from forgetting.records import read_run_record
from forgetting.run import run_batch
from forgetting.run.versions import SCRIPTED_NOTE
from forgetting_testkit.runner import TASKS, batch_of, ok_calls, run_dir, run_json, snapshot, study_at

pytestmark = pytest.mark.slow

DELETED = "delayed-turn-tool_output-100"
TASK = "demo__confkit-1"


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """Both agents × (baseline, delayed-turn-tool_output-100) on one demo task, run once."""
    tmp = tmp_path_factory.mktemp("runner")
    study = study_at(tmp, agents=["mini", "mini-text"], configurations={"names": [DELETED]})
    documents = {}
    for agent in ("mini", "mini-text"):
        for conf in ("baseline", DELETED):
            batch = batch_of(study, agent, conf)
            manifest = Layout(study.results_dir).batch_dir(batch.key) / "runs.json"
            documents[(agent, conf)] = run_batch(study, batch, manifest=manifest, log=tmp / "batch.log", echo=False)
    return study, documents, tmp


@pytest.mark.parametrize("agent", ["mini", "mini-text"])
def test_a_finished_run_directory_holds_what_the_later_stages_read(finished, agent, tmp_path):
    study, documents, _ = finished
    rid = f"{agent}/baseline/{TASK}/1"
    d = run_dir(study, rid)
    assert sorted(p.name for p in d.iterdir()) == sorted([AGENT_LOG, CALLS, PATCH, RUN_JSON, TRAJECTORY])
    meta = run_json(study, rid)
    (run,) = [r for r in batch_of(study, agent, "baseline").runs if r.run_id == rid]
    calls = ok_calls(d)
    assert meta["run_id"] == rid and meta["agent"] == agent and meta["task"] == TASK and meta["repeat"] == 1
    assert meta["seed"] == run.seed and meta["deletion"] == run.deletion.as_dict()
    assert meta["status"] == "submitted" and meta["exit_status"] == "Submitted" and meta["error"] is None
    assert meta["turns"] == len(calls) == meta["agent_calls"] and 0 < meta["turns"] < meta["turn_cap"] == 40
    assert meta["patch_bytes"] == (d / PATCH).stat().st_size > 0
    assert meta["wall_s"] > 0 and meta["model_s"] >= 0 and meta["started"] > 1.7e9
    assert meta["model_backend"] == "scripted"
    assert meta["versions"]["agent"]["version"] == minisweagent.__version__
    assert meta["versions"]["model"]["note"] == SCRIPTED_NOTE
    assert meta["versions"]["pipeline"]["forgetting"]
    # the record every stage reads back: what the runner wrote, field for field and byte for byte
    record = read_run_record(d / RUN_JSON)
    assert record.to_dict() == meta and record.to_json() == (d / RUN_JSON).read_text()
    # the agent's own trajectory, unreduced, in mini's format and message style
    traj = json.loads((d / TRAJECTORY).read_text())
    assert traj["trajectory_format"] == "mini-swe-agent-1.1" and traj["info"]["exit_status"] == "Submitted"
    roles = {m["role"] for m in traj["messages"]}
    assert ("tool" in roles) == (agent == "mini")
    assert traj["info"]["config"]["agent"]["step_limit"] == 40
    # every request went through the proxy, which sent the run's seed upstream and logged it
    header = json.loads((d / CALLS).read_text().splitlines()[0])
    assert header["run_id"] == rid and header["seed"] == run.seed
    # the patch is the submission, and it applies to a fresh checkout of the task
    patch = (d / PATCH).read_text()
    assert patch == traj["info"]["submission"] and patch.startswith("diff --git")
    repo = checkout(TASKS, TASK, tmp_path / "fresh")
    subprocess.run(["git", "apply", "--check", "-"], input=patch, text=True, cwd=repo, check=True)
    # the manifest
    entry = documents[(agent, "baseline")]["runs"][rid]
    assert entry == {"status": "submitted", "turns": meta["turns"], "resolved": None}


@pytest.mark.parametrize("agent", ["mini", "mini-text"])
def test_deleting_tool_output_makes_the_agent_read_again(finished, agent):
    study, _, _ = finished
    base = label_run(run_dir(study, f"{agent}/baseline/{TASK}/1"))
    cut = label_run(run_dir(study, f"{agent}/{DELETED}/{TASK}/1"))
    assert base.summary["n_refetches"] == 0
    assert cut.summary["n_outputs_deleted"] > 0
    assert cut.summary["n_refetches_deleted"] >= 1
    # the proxy replaced old tool outputs with the placeholder in what the model was sent
    deleted = [r for c in ok_calls(run_dir(study, f"{agent}/{DELETED}/{TASK}/1")) for r in c["deleted"]]
    assert deleted and {r["part"] for r in deleted} == {"tool_output"}


def test_a_second_invocation_keeps_finished_runs_and_force_redoes_them(finished):
    study, documents, tmp = finished
    batch = batch_of(study, "mini", "baseline")
    runs_root = Layout(study.results_dir).results / "runs" / "mini" / "baseline"
    before = snapshot(runs_root)
    again = run_batch(study, batch, log=tmp / "again.log", echo=False)
    assert snapshot(runs_root) == before
    assert again["runs"] == documents[("mini", "baseline")]["runs"]
    assert "1 of 1 runs finished before; kept" in (tmp / "again.log").read_text()

    forced = study_at(tmp, agents=["mini", "mini-text"], configurations={"names": [DELETED]}, force_rerun=True)
    old = run_json(study, batch.runs[0].run_id)
    redo = run_batch(forced, batch_of(forced, "mini", "baseline"), echo=False)
    new = run_json(study, batch.runs[0].run_id)
    assert new["started"] > old["started"]
    # the same seed and the deterministic stand-in model: the same run again
    assert (new["status"], new["turns"]) == (old["status"], old["turns"])
    assert redo["runs"] == documents[("mini", "baseline")]["runs"]
    assert (run_dir(study, batch.runs[0].run_id) / PATCH).read_bytes() == before[f"{TASK}/1/{PATCH}"][1]
