"""``forgetting cost`` on a run directory (a real call log) and on a trajectory."""

from __future__ import annotations

import json

import pyarrow.csv as pacsv

from forgetting.prompt import chat_format, tokenizer
from forgetting.records import PartDeletion, schemas
from forgetting.records.calllog import CallLogWriter

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a command",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        },
    }
]


def _assistant(i: int) -> dict:
    args = json.dumps({"command": f"sed -n 1,40p file{i}.py"})
    return {
        "role": "assistant",
        "content": f"Reading file {i}.",
        "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": args}}],
    }


def make_output(i: int) -> str:
    return "\n".join(f"{n}: line {n} of file {i}" for n in range(1, 41))


def make_run_dir(root):
    """Four calls through the real call-log writer; call 4 rewrites turn 1's tool output."""
    run_dir = root / "runs" / "mini" / "delayed-turn-tool_output-100" / "demo__x-1" / "1"
    history = [
        {"role": "system", "content": "You are a careful engineer."},
        {"role": "user", "content": "Fix the off-by-one in the parser."},
    ]
    prompts = []
    with CallLogWriter(
        run_dir / "calls.jsonl", {"run_id": "mini/delayed-turn-tool_output-100/demo__x-1/1"}
    ) as w:
        for i in range(1, 5):
            sent = [dict(m) for m in history]
            deleted = []
            if i == 4:  # turn 1 left the last two turns: its output is replaced by a placeholder
                sent[3] = {**sent[3], "content": "[output deleted]"}
                before = tokenizer.count(history[3]["content"])
                deleted = [PartDeletion(1, "tool_output", 3, "turn", before, 4, before)]
            prompts.append(chat_format.prompt_token_ids(sent, TOOLS))
            reply = _assistant(i)
            w.append_call(
                messages=sent,
                tools=TOOLS,
                params={"temperature": 0},
                deleted=deleted,
                response={
                    "content": reply["content"],
                    "tool_calls": reply["tool_calls"],
                    "finish_reason": "tool_calls",
                },
                usage={
                    "completion_tokens": 20 + i,
                    "prompt_tokens": len(prompts[-1]),
                    "prompt_tokens_details": {"cached_tokens": 0 if i == 1 else 64},
                },
                t_request=1000.0 + 10 * i,
                t_response=1005.0 + 10 * i,
            )
            history += [reply, {"role": "tool", "tool_call_id": f"c{i}", "content": make_output(i)}]
    return run_dir, prompts


def test_cost_on_a_run_directory(tmp_path, run_cli):
    run_dir, prompts = make_run_dir(tmp_path)
    out = tmp_path / "calls.parquet"
    proc = run_cli("cost", run_dir, "--pricing", "paper", "--pricing", "vllm-blocks", "--out", out)
    assert proc.returncode == 0, proc.stderr
    table = schemas.read_dataset(out, schemas.CALLS_SCHEMA).to_pylist()
    assert [r["prompt_tokens"] for r in table] == [len(p) for p in prompts]
    assert [r["output_tokens"] for r in table] == [21, 22, 23, 24]
    # calls 2 and 3 only append; call 4 rewrites turn 1's output: the prefix breaks inside it
    assert [r["rebilled_tokens"] > 0 for r in table] == [False, False, False, True]
    assert [r["prefix_tokens"] for r in table[:3]] == [0, len(prompts[0]), len(prompts[1])]
    assert all(
        r["cached_tokens"] + r["new_tokens"] + r["rebilled_tokens"] == r["prompt_tokens"] for r in table
    )
    shared = next(k for k, (a, b) in enumerate(zip(prompts[3], prompts[2], strict=False)) if a != b)
    assert table[3]["prefix_tokens"] == shared
    assert [r["deleted_parts"] for r in table] == [0, 0, 0, 1]
    assert table[3]["deleted_tokens"] == tokenizer.count(make_output(1))  # the original's tokens
    lines = proc.stdout.strip().splitlines()
    paper, blocks, written = lines[-3:]
    total = sum(r["prompt_tokens"] for r in table)
    rebilled = sum(r["rebilled_tokens"] for r in table)
    assert paper.startswith("mini/delayed-turn-tool_output-100/demo__x-1/1 [paper]: 4 calls; ")
    assert f"prompt {total:,} tokens" in paper and f"re-billed {rebilled:,} (" in paper
    assert "shares of cost: cached input " in paper and "re-billed input" in paper and "output" in paper
    assert "server-reported cached 192 vs reconstructed" in blocks
    assert written == f"4 call rows -> {out}"


def test_cost_prints_rows_and_writes_csv(tmp_path, run_cli):
    run_dir, _ = make_run_dir(tmp_path)
    proc = run_cli("cost", run_dir / "calls.jsonl")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:4] == ["call", "msgs", "prompt", "cached"]
    assert [line.split()[0] for line in lines[1:5]] == ["1", "2", "3", "4"]
    assert "[paper]" in lines[5]
    csv = tmp_path / "rows.csv"
    proc = run_cli("cost", run_dir, "--out", csv)
    assert proc.returncode == 0, proc.stderr
    assert pacsv.read_csv(csv).column_names == schemas.CALLS_SCHEMA.names


def test_cost_on_a_trajectory(tmp_path, run_cli):
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]
    for i in range(3):
        messages += [
            {**_assistant(i), "extra": {"response": {"usage": {"completion_tokens": 5}}, "timestamp": i}},
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"out {i}"},
        ]
    path = tmp_path / "demo__x-1.traj.json"
    path.write_text(json.dumps({"messages": messages, "trajectory_format": "mini-swe-agent-1.1"}))
    proc = run_cli("cost", path, "--pricing", "write-premium-ttl")
    assert proc.returncode == 0, proc.stderr
    summary = proc.stdout.strip().splitlines()[-1]
    assert summary.startswith("demo__x-1 [write-premium-ttl]: 3 calls; ")
    assert "re-billed 0 (0.0 %)" in summary and "cache-write premium" in summary


def test_cost_errors_are_one_line(tmp_path, run_cli):
    run_dir, _ = make_run_dir(tmp_path)
    proc = run_cli("cost", run_dir, "--out", tmp_path / "x.json")
    assert proc.returncode == 2 and proc.stderr.strip().endswith("unknown format .json; use .parquet or .csv")
    proc = run_cli("cost", run_dir, "--pricing", "no-such-profile")
    assert proc.returncode == 2 and "no pricing profile 'no-such-profile'" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    proc = run_cli("cost", tmp_path)
    assert proc.returncode == 2 and "not a run directory" in proc.stderr


def _tear_last_line(path) -> int:
    """Cut the last record of a call log short, as a proxy killed mid-write leaves it; returns
    the number of the torn line."""
    data = path.read_bytes()
    start = data.rstrip(b"\n").rfind(b"\n") + 1
    path.write_bytes(data[: start + 30])
    return data[:start].count(b"\n") + 1


def test_cost_refuses_a_torn_call_log_unless_allowed(tmp_path, run_cli):
    run_dir, _ = make_run_dir(tmp_path)
    line = _tear_last_line(run_dir / "calls.jsonl")
    for target in (run_dir, run_dir / "calls.jsonl"):
        proc = run_cli("cost", target)
        assert proc.returncode == 2 and proc.stdout == ""
        (err,) = proc.stderr.strip().splitlines()
        assert err.startswith(f"error: {run_dir / 'calls.jsonl'}: line {line} is torn")
        assert "--allow-torn" in err and "3 calls before it" in err
    proc = run_cli("cost", run_dir, "--allow-torn")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == (
        f"warning: {run_dir / 'calls.jsonl'}: the call log is torn at line {line}; "
        "priced the 3 calls read before it"
    )
    assert "[paper]: 3 calls; " in proc.stdout.splitlines()[-1]
