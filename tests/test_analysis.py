"""The per-batch analysis joins run record, evaluation, behaviour and cost into table rows."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
import yaml

from forgetting.analyze.batch import analyze_batch
from forgetting.foundation.layout import Layout
from forgetting.records.calllog import CallLogWriter
from forgetting.study.config import load_study
from forgetting.study.plan import plan_batches
from forgetting_testkit.trajectories import write_run_json

TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object",
         "properties": {"command": {"type": "string"}}, "required": ["command"]}}}]


def assistant(i: int, command: str) -> dict:
    return {"role": "assistant", "content": f"Step {i}: let me run {command}.",
            "tool_calls": [{"id": f"c{i}", "type": "function",
                            "function": {"name": "bash", "arguments": json.dumps({"command": command})}}]}


def tool(i: int, output: str) -> dict:
    content = f"<returncode>0</returncode>\n<output>\n{output}</output>"
    return {"role": "tool", "tool_call_id": f"c{i}", "content": content}


FILE = "".join(f"line {n} of the module\n" for n in range(1, 21))
STEPS = [("cat mod.py", FILE), ("grep -rn bug .", "mod.py:3: bug\n"), ("cat mod.py", FILE),
         ("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cat patch.txt", "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n")]


def write_run(run_dir, run, *, resolved: bool) -> None:
    run_dir.mkdir(parents=True)
    history = [{"role": "system", "content": "You are a helpful assistant."},
               {"role": "user", "content": "Please solve this issue: the bug."}]
    with CallLogWriter(run_dir / "calls.jsonl", {"run_id": run.run_id, "seed": run.seed}) as log:
        for i, (cmd, out) in enumerate(STEPS, start=1):
            reply = assistant(i, cmd)
            log.append_call(messages=history, tools=TOOLS, params={"model": "m"}, deleted=[],
                            response={k: reply[k] for k in ("content", "tool_calls")} | {"finish_reason": "tool_calls"},
                            usage={"prompt_tokens": 1, "completion_tokens": 20}, t_request=100.0 + i,
                            t_response=100.5 + i)
            history = [*history, reply, tool(i, out)]
    traj = {"info": {"exit_status": "Submitted", "submission": "diff"}, "messages": history,
            "trajectory_format": "mini-swe-agent-1.1"}
    (run_dir / "trajectory.json").write_text(json.dumps(traj))
    (run_dir / "patch.diff").write_text("diff --git a/mod.py b/mod.py\n")
    write_run_json(run_dir, seed=run.seed, turns=4, turn_cap=200, wall_s=12.5, started=1.7e9,
                   model_backend="scripted stand-in for the LLM")
    status = "resolved" if resolved else "unresolved"
    (run_dir / "eval.json").write_text(json.dumps({"status": status, "resolved": resolved}))


@pytest.fixture
def study(tmp_path, repo_root):
    cfg = yaml.safe_load((repo_root / "config/demo.yaml").read_text())
    cfg["study"]["results_dir"] = str(tmp_path / "results")
    cfg["tasks"] = {"ids": ["demo__timekit-1", "demo__ledger-1"]}
    cfg["configurations"] = {"names": "none"}
    cfg["agents"] = ["mini"]
    cfg["repeats"] = {"baseline": 1}
    cfg["pricing"] = {"dir": str(repo_root / "resources/pricing"), "primary": "paper", "profiles": ["paper"]}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return load_study(path)


def test_a_batch_becomes_one_row_per_run_and_a_broken_run_is_named(study, tmp_path):
    (batch,) = plan_batches(study)
    good, broken = batch.runs
    layout = Layout(study.results_dir)
    write_run(layout.run_dir(good.run_id), good, resolved=True)
    write_run(layout.run_dir(broken.run_id), broken, resolved=False)
    (layout.run_dir(broken.run_id) / "calls.jsonl").write_text("{not json\n{}\n")
    names = ("summary", "calls", "tool_calls", "run_costs", "timings")
    outputs = {name: tmp_path / f"{name}.parquet" for name in names}
    log = tmp_path / "analyze.log"
    assert analyze_batch(study, batch, outputs=outputs, log=log) == 1

    row, unanalysed = pq.read_table(outputs["summary"]).to_pylist()
    assert unanalysed["run_id"] == broken.run_id and unanalysed["status"] is None
    assert "calls.jsonl" in unanalysed["error"] and unanalysed["error"].startswith("not analysed: ")
    assert row["run_id"] == good.run_id and row["configuration"] == "baseline" and row["seed"] == good.seed
    assert (row["status"], row["eval_status"], row["resolved"], row["turns"]) == ("submitted", "resolved", True, 4)
    assert row["model_backend"] == "scripted stand-in for the LLM" and row["patch_missing"] is False
    # behaviour: 4 tool calls, 2 reads of the same 20 lines -> the second is a re-fetch
    assert (row["n_tool_calls"], row["n_reads"], row["n_refetches"]) == (4, 2, 1)
    assert row["refetch_rate"] == 0.5 and row["looping"] is False and row["capped"] is False
    # cost: an append-only history re-bills nothing; tokens add up
    assert row["rebilled_tokens"] == 0
    assert row["cached_tokens"] + row["new_tokens"] == row["prompt_tokens"] > 0
    assert row["output_tokens"] == 4 * 20 and row["cost_cache"] < row["cost_flat"]
    calls = pq.read_table(outputs["calls"])
    assert calls.num_rows == 4 and set(calls.column("run_id").to_pylist()) == {good.run_id}
    assert pq.read_table(outputs["tool_calls"]).num_rows == 4
    assert pq.read_table(outputs["run_costs"]).column("profile").to_pylist() == ["paper"]
    assert pq.read_table(outputs["timings"]).to_pylist()[0]["wall_s"] == 12.5
    text = log.read_text()
    assert broken.run_id in text and "calls.jsonl" in text and "not analysed" in text
