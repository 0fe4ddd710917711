"""Trae agent's runner path end to end, up to and through the launch of ``trae-cli``: the
stand-in ``forgetting_testkit/fakes/trae_cli.py`` plays the agent (Trae needs Python ≥ 3.12 and its
container) and the vLLM test double the model. What only the cluster can show — Trae itself
inside a SWE-bench instance image — is in docs/runs.md."""

from __future__ import annotations

import json
import re

import pytest

from forgetting import tokenizer
from forgetting.agents import TRAE_COMMIT
from forgetting.behaviour import label_run
from forgetting.behaviour.load import load_trajectory
from forgetting.calllog import read_call_log
from forgetting.layout import CALLS, PATCH, TRAJECTORY
from forgetting.runner import RunsNotFinished, run_batch
from forgetting_testkit.runner import FAKE_TRAE, FAKE_VLLM_MODEL, batch_of, ok_calls, run_dir, run_json, study_at

pytestmark = pytest.mark.slow

TASK = "demo__confkit-1"
RID = f"trae/baseline/{TASK}/1"


def _study(tmp_path):
    return study_at(tmp_path, agents=["trae"], model=FAKE_VLLM_MODEL,
                    agent={"turn_cap": 30, "trae": {"executable": str(FAKE_TRAE)}})


def test_trae_runs_through_its_proxy_and_leaves_a_finished_run(tmp_path, monkeypatch):
    argv_file = tmp_path / "trae-argv.json"
    monkeypatch.setenv("FAKE_TRAE_ARGV", str(argv_file))
    monkeypatch.setenv("OPENROUTER_BASE_URL", "http://127.0.0.1:9/v1")  # would bypass the proxy if it leaked
    study = _study(tmp_path)
    document = run_batch(study, batch_of(study, "trae", "baseline"), echo=False)
    assert document["runs"][RID] == {"status": "submitted", "turns": 2, "resolved": None}
    d = run_dir(study, RID)
    meta = run_json(study, RID)
    assert meta["agent_exit_code"] == 0 and meta["exit_status"] == "Submitted" and meta["turn_cap"] == 30
    assert meta["versions"]["agent"] == {"name": "trae-agent", "commit": TRAE_COMMIT, "install": None}
    # launched with the command line and config file the runner wrote
    launched = json.loads(argv_file.read_text())
    argv = launched["argv"]
    assert argv[0] == "run" and "--must-patch" in argv
    header = json.loads((d / CALLS).read_text().splitlines()[0])
    proxy_url = launched["config"]["model_providers"]["forgetting_proxy"]["base_url"]
    assert proxy_url.startswith("http://127.0.0.1:") and proxy_url.endswith("/v1")
    assert header["run_id"] == RID
    assert launched["config"]["agents"]["trae_agent"]["max_steps"] == 30
    # every model call went through the proxy, with Trae's tools
    calls = ok_calls(d)
    assert len(calls) == 2 and all(c["tools"] for c in calls)
    log = read_call_log(d / CALLS)
    prompt = tokenizer.decode(log.prompt_ids(log.calls[0]))  # the tools are part of the exact prompt
    assert all(f"<name>{tool}</name>" in prompt
               for tool in ("bash", "str_replace_based_edit_tool", "sequentialthinking", "task_done"))
    # the trajectory is Trae's own, and the behaviour analysis reads it
    traj = load_trajectory(d / TRAJECTORY, "trae")
    assert traj.turns == 2 and traj.exit_status == "Submitted"
    assert label_run(d).summary["n_tool_calls"] == 2
    patch = (d / PATCH).read_text()
    assert patch.startswith("diff --git") and "edited by the stand-in trae-cli" in patch
    assert meta["patch_bytes"] == len(patch.encode())


def test_trae_losing_its_model_is_not_recorded_as_a_result(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_TRAE_FAIL", "connection")
    study = _study(tmp_path)
    with pytest.raises(RunsNotFinished, match=rf"model unavailable: Connection error\..*\({re.escape(RID)}\)"):
        run_batch(study, batch_of(study, "trae", "baseline"), echo=False)
    assert not run_dir(study, RID).exists()
