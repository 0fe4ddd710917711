"""Trae agent's runner path end to end, up to and through the launch of ``trae-cli``: the
test double ``forgetting_testkit/fakes/trae_cli.py`` plays the agent (Trae's loop: its tools,
``task_done`` under ``--must-patch``) and the scripted model — or the vLLM test double — the
model. The real ``trae-cli`` runs in tests/runner/test_trae_cli.py where one is installed; what
only the cluster can show — Trae inside a SWE-bench instance image — is in docs/runs.md."""

from __future__ import annotations

import json
import re

import pytest

from forgetting.agents import TRAE_COMMIT, TRAE_TOOLS
from forgetting.behaviour import label_run
from forgetting.behaviour.load import load_trajectory
from forgetting.foundation.layout import CALLS, PATCH, TRAJECTORY
from forgetting.prompt import tokenizer
from forgetting.records.calllog import read_call_log
from forgetting.run import RunsNotFinished, run_batch
from forgetting_testkit.runner import (
    FAKE_TRAE,
    FAKE_VLLM_MODEL,
    SCRIPTED,
    batch_of,
    ok_calls,
    run_dir,
    run_json,
    study_at,
)

pytestmark = pytest.mark.slow

TASK = "demo__confkit-1"
RID = f"trae/baseline/{TASK}/1"


def _study(tmp_path, model=SCRIPTED, **sections):
    return study_at(tmp_path, agents=["trae"], model=model,
                    agent={"turn_cap": 30, "trae": {"executable": str(FAKE_TRAE)}}, **sections)


def test_trae_runs_through_its_proxy_and_ends_submitted_by_task_done(tmp_path, monkeypatch):
    argv_file = tmp_path / "trae-argv.json"
    monkeypatch.setenv("FAKE_TRAE_ARGV", str(argv_file))
    monkeypatch.setenv("OPENROUTER_BASE_URL", "http://127.0.0.1:9/v1")  # would bypass the proxy if it leaked
    study = _study(tmp_path)
    document = run_batch(study, batch_of(study, "trae", "baseline"), echo=False)
    entry = document["runs"][RID]
    assert entry["status"] == "submitted" and entry["turns"] < 30
    d = run_dir(study, RID)
    meta = run_json(study, RID)
    assert meta["agent_exit_code"] == 0 and meta["exit_status"] == "Submitted" and meta["turn_cap"] == 30
    assert meta["agent_calls"] == entry["turns"]
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
    assert len(calls) == entry["turns"] and all(c["tools"] for c in calls)
    log = read_call_log(d / CALLS)
    prompt = tokenizer.decode(log.prompt_ids(log.calls[0]))  # the tools are part of the exact prompt
    assert all(f"<name>{tool}</name>" in prompt for tool in TRAE_TOOLS)
    # the trajectory is Trae's own: views and edits with its editor, the end by task_done
    traj = load_trajectory(d / TRAJECTORY, "trae")
    assert traj.turns == entry["turns"] and traj.exit_status == "Submitted"
    tools = [e.tool for e in traj.events]
    assert tools[-1] == "task_done" and tools.count("task_done") == 1
    assert {e.command for e in traj.events if e.tool == "str_replace_based_edit_tool"} == {"view", "str_replace"}
    assert label_run(d).summary["n_tool_calls"] == len(traj.events)
    patch = (d / PATCH).read_text()
    assert patch.startswith("diff --git a/confkit/sources.py") and "+    return _INLINE_COMMENT.sub" in patch
    assert meta["patch_bytes"] == len(patch.encode())


def test_trae_refuses_an_empty_patch_so_a_run_that_gives_up_ends_capped(tmp_path):
    """Every tool output deleted at once: the stand-in gives up without an edit; Trae's
    ``--must-patch`` answers each ``task_done`` with its empty-patch message until the cap."""
    study = _study(tmp_path, configurations={"names": ["immediate-turn-tool_output-100"]})
    rid = f"trae/immediate-turn-tool_output-100/{TASK}/1"
    document = run_batch(study, batch_of(study, "trae", "immediate-turn-tool_output-100"), echo=False)
    assert document["runs"][rid]["status"] == "capped" and document["runs"][rid]["turns"] == 30
    meta = run_json(study, rid)
    assert meta["exit_status"] == "LimitsExceeded" and meta["patch_bytes"] == 0
    traj = load_trajectory(run_dir(study, rid) / TRAJECTORY, "trae")
    assert traj.exit_status == "LimitsExceeded" and traj.events[-1].tool == "task_done"


def test_trae_losing_its_model_is_not_recorded_as_a_result(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_TRAE_FAIL", "connection")
    study = _study(tmp_path, model=FAKE_VLLM_MODEL)
    with pytest.raises(RunsNotFinished, match=rf"model unavailable: Connection error\..*\({re.escape(RID)}\)"):
        run_batch(study, batch_of(study, "trae", "baseline"), echo=False)
    assert not run_dir(study, RID).exists()
