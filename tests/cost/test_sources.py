"""Prompts from a proxy call log and from mini-swe-agent trajectories (both formats)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forgetting.cost import cost_run, load_profiles, load_run
from forgetting.cost.trajectory import MINI_BASH_TOOL
from forgetting.foundation.errors import RunOutputError
from forgetting.prompt import chat_format
from forgetting_testkit.naive_cost import naive_prefixes

GEN = [151644, 77091, 198]  # <|im_start|>assistant\n
SYS, USER = list(range(100, 120)), list(range(200, 210))  # 20 and 10 tokens
A1, O1 = GEN + list(range(300, 309)), list(range(400, 430))  # 12 and 30
O1_REWRITTEN = [*range(400, 410), 999]  # 11: shares 10 tokens with O1
A2, O2 = GEN + list(range(500, 505)), list(range(600, 620))  # 8 and 20
A3, O3 = [*GEN, 700], [800, 801]  # 4 and 2


#: deletion records as the engine writes them: turn 1's output thinned 30 -> 11 tokens
#: (19 removed); turn 2's reasoning loses 5 tokens
O1_THINNED = {"turn": 1, "part": "tool_output", "message_index": 3, "mode": "token",
              "tokens_before": 30, "tokens_after": 11, "tokens_removed": 19}
A2_THINNED = {"turn": 2, "part": "reasoning", "message_index": 4, "mode": "token",
              "tokens_before": 8, "tokens_after": 3, "tokens_removed": 5}


def write_log(path: Path) -> None:
    """A call log written record by record, with token ids chosen so that every count is
    checkable by hand (the reader does not re-tokenize)."""
    segs = {
        "s": SYS,
        "u": USER,
        "a1": A1,
        "o1": O1,
        "o1r": O1_REWRITTEN,
        "a2": A2,
        "o2": O2,
        "a3": A3,
        "o3": O3,
    }
    lines = [
        {"type": "header", "format": "forgetting-calllog/1", "run_id": "mini/delayed-turn-tool_output-50/t/1"}
    ]
    for key, ids in segs.items():
        lines.append(
            {
                "type": "segment",
                "key": key,
                "message": {"role": "user", "content": key},
                "n_tokens": len(ids),
                "token_ids": ids,
            }
        )

    def call(index, keys, *, usage, deleted=(), response=None, t=0.0):
        return {
            "type": "call",
            "index": index,
            "ok": True,
            "t_request": t,
            "t_response": t + 1,
            "segments": keys,
            "params": {},
            "deleted": list(deleted),
            "response": response or {"content": "ok", "finish_reason": "stop"},
            "usage": usage,
            "status": 200,
            "error": None,
        }

    lines += [
        call(1, ["s", "u"], usage={"completion_tokens": 5}, t=0),
        {
            "type": "call",
            "index": None,
            "ok": False,
            "t_request": 1,
            "t_response": 2,
            "segments": ["s", "u"],
            "params": {},
            "deleted": [],
            "response": None,
            "usage": None,
            "status": 502,
            "error": "upstream",
        },
        call(2, ["s", "u", "a1", "o1"], usage=None, t=10),
        call(
            3,
            ["s", "u", "a1", "o1r", "a2", "o2"],
            t=20,
            usage={"prompt_tokens": 84, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 32}},
            deleted=[O1_THINNED],
        ),
        call(
            4,
            ["s", "u", "a1", "o1r", "a2", "o2", "a3", "o3"],
            t=30,
            usage={"prompt_tokens": 90, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 64}},
            deleted=[O1_THINNED, A2_THINNED],
        ),
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"type": "call", "ind')  # torn last line


def test_call_log_prompts_split_deletions_and_agreement(tmp_path, repo_root):
    log = tmp_path / "calls.jsonl"
    write_log(log)
    profiles = load_profiles(repo_root / "resources/pricing", ["paper", "vllm-blocks"])
    with pytest.raises(RunOutputError, match=r"calls.jsonl: line 16 is torn"):
        cost_run(tmp_path, profiles)  # a torn log is no run's whole cost
    result = cost_run(tmp_path, profiles, allow_torn=True)  # the run directory
    assert result.torn_line == 16
    calls = result.calls.to_pylist()
    assert result.run_id == "mini/delayed-turn-tool_output-50/t/1"
    assert [c["call"] for c in calls] == [1, 2, 3, 4]  # the failed call and the torn line are not billed
    # n: 33 = 20+10+3; 75 = 20+10+12+30+3; 84 = 20+10+12+11+8+20+3; 90 = 84-3+4+2+3
    # LCP: 0; 33 (all of call 1: its generation prompt heads A1); 52 = 42 + 10 shared tokens of
    # O1 and its rewrite; 84 (all of call 3). B: 0; 30; 53 (4 positions); 81 (6 positions).
    assert [
        (c["prompt_tokens"], c["prefix_tokens"], c["cached_tokens"], c["new_tokens"], c["rebilled_tokens"])
        for c in calls
    ] == [(33, 0, 0, 33, 0), (75, 33, 33, 42, 0), (84, 52, 52, 31, 1), (90, 84, 84, 6, 0)]
    ok_tokens = len(chat_format.completion_token_ids({"role": "assistant", "content": "ok"}))
    assert [c["output_tokens"] for c in calls] == [5, ok_tokens, 7, 3]  # usage, else tokenized
    assert [c["reported_cached_tokens"] for c in calls] == [None, None, 32, 64]
    # deletions: call 3 rewrites turn 1's output (30 -> 11); call 4 logs it again (counted once)
    # and removes 5 reasoning tokens of turn 2
    assert [
        (c["deleted_parts"], c["deleted_tokens"], c["new_deleted_parts"], c["new_deleted_tokens"])
        for c in calls
    ] == [(0, 0, 0, 0), (0, 0, 0, 0), (1, 19, 1, 19), (2, 24, 1, 5)]
    assert result.summary["deleted_tokens"] == 24
    # agreement over calls 3 and 4: reported 32 + 64 = 96; vLLM blocks: r16(min(52, 83)) = 48,
    # r16(min(84, 89)) = 80 -> 128; the paper's model: 52 + 84 = 136
    blocks = result.profile_row("vllm-blocks")
    assert (
        blocks["reported_calls"],
        blocks["reported_cached_tokens"],
        blocks["reconstructed_cached_tokens"],
    ) == (2, 96, 128)
    assert blocks["cache_agreement"] == pytest.approx(0.75)
    assert result.agreement() == {
        "profile": "vllm-blocks",
        "calls": 2,
        "reported": 96,
        "reconstructed": 128,
        "difference": -32,
        "ratio": 0.75,
    }
    assert result.profile_row("paper")["reconstructed_cached_tokens"] == 136
    assert result.summary["reported_cached_tokens"] == 96
    assert result.run_costs.column("cached_tokens").to_pylist() == [169, 0 + 32 + 48 + 80]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (('"tokens_removed": 5', '"removed_tokens": 5'), "lacks tokens_removed"),  # no guessing of names
        (('"tokens_removed": 5', '"tokens_removed": 5, "what": 1'), "has unknown field what"),
        (('"tokens_removed": 5', '"tokens_removed": -5'), "a token count is negative"),
        (('"tokens_removed": 5', '"tokens_removed": 9'), "removes more tokens than the part had"),
        (('"tokens_removed": 5', '"tokens_removed": "5"'), "tokens_removed is not int"),
        (('"mode": "token", "tokens_before": 8', '"mode": "turn", "tokens_before": 8'),
         "a turn-level rewrite removes every token"),
        (('"part": "reasoning"', '"part": "reasoning_2"'), "part 'reasoning_2' is not one of"),
    ],
)
def test_call_log_with_a_bad_deleted_record(tmp_path, edit, message):
    write_log(tmp_path / "calls.jsonl")
    text = (tmp_path / "calls.jsonl").read_text()
    assert edit[0] in text
    (tmp_path / "calls.jsonl").write_text(text.replace(edit[0], edit[1]))
    with pytest.raises(RunOutputError, match=rf"calls.jsonl: line 15 \(call 4\): deleted\[1\]: .*{message}"):
        load_run(tmp_path, allow_torn=True)


def _tool_call(cid: str, command: str) -> dict:
    return {
        "id": cid,
        "type": "function",
        "function": {"name": "bash", "arguments": json.dumps({"command": command})},
    }


def _extra(completion: int, cached: int, t: float, finish: str = "tool_calls") -> dict:
    usage = {
        "prompt_tokens": 4096,  # as reported; no count here depends on it
        "completion_tokens": completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }
    return {
        "response": {"choices": [{"finish_reason": finish, "message": {}}], "usage": usage},
        "timestamp": t,
    }


MINI2 = [
    {"role": "system", "content": "You are a helpful assistant that can interact with a computer."},
    {"role": "user", "content": "Please solve this issue: the parser drops the last line."},
    {
        "role": "assistant",
        "content": "Let me look at the files.",
        "tool_calls": [_tool_call("c1", "ls")],
        "extra": _extra(17, 0, 1000.0),
    },
    {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "<returncode>0</returncode>\n<output>parser.py\n</output>",
    },
    {
        "role": "user",
        "content": "Format error: every response MUST include exactly one tool call.",
        "extra": {**_extra(9, 16, 1010.0, "stop"), "interrupt_type": "FormatError"},
    },
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [_tool_call("c2", "cat parser.py")],
        "extra": _extra(21, 32, 1020.0),
    },
    {
        "role": "tool",
        "tool_call_id": "c2",
        "content": "<returncode>0</returncode>\n<output>def parse(): ...\n</output>",
    },
    {
        "role": "assistant",
        "content": "Done.",
        "tool_calls": [_tool_call("c3", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")],
        "extra": _extra(12, 48, 1030.0),
    },
    {"role": "tool", "tool_call_id": "c3", "content": "<returncode>0</returncode>\n<output>\n</output>"},
    {"role": "exit", "content": "Submitted", "extra": {"exit_status": "Submitted", "submission": ""}},
]

MINI1 = [
    {"role": "system", "content": "You are a helpful assistant that can interact with a computer."},
    {"role": "user", "content": "Please solve this issue: the parser drops the last line."},
    {
        "role": "assistant",
        "content": "THOUGHT: look around.\n\n```bash\nls\n```",
        "extra": {"response": {"usage": {"completion_tokens": 11}}},
    },
    {"role": "user", "content": "<returncode>0</returncode>\n<output>\nparser.py\n</output>"},
    {"role": "assistant", "content": "THOUGHT: read it.\n\n```bash\ncat parser.py\n```"},
    {"role": "user", "content": "<returncode>0</returncode>\n<output>\ndef parse(): ...\n</output>"},
]


def test_mini_swe_agent_2_tool_calling_trajectory(tmp_path):
    path = tmp_path / "demo__parser-1.traj.json"
    path.write_text(
        json.dumps(
            {
                "info": {"exit_status": "Submitted"},
                "messages": MINI2,
                "trajectory_format": "mini-swe-agent-1.1",
            }
        )
    )
    run = load_run(path)
    assert run.kind == "trajectory" and run.run_id == "demo__parser-1" and run.has_times
    # calls: three assistant messages and the rejected response carried by the format error
    markers = [2, 4, 5, 7]
    assert [c.n_messages for c in run.calls] == markers
    for call, j in zip(run.calls, markers, strict=True):  # rendered once per message, sliced per call
        assert run.prompt_tokens(call) == chat_format.prompt_token_ids(MINI2[:j], [MINI_BASH_TOOL])
    result = cost_run(path, load_profiles(None, ["paper"]))
    calls = result.calls.to_pylist()
    assert [c["output_tokens"] for c in calls] == [17, 9, 21, 12]
    assert [c["reported_cached_tokens"] for c in calls] == [0, 16, 32, 48]
    assert [c["finish_reason"] for c in calls] == ["tool_calls", "stop", "tool_calls", "tool_calls"]
    assert [c["rebilled_tokens"] for c in calls] == [0, 0, 0, 0]  # the agent's history only grows
    assert [c["prefix_tokens"] for c in calls] == [n for _, n, _ in naive_prefixes(run)]
    # with no deletion every prompt extends the one before, generation prompt included, except
    # after the rejected response: there a user block follows, so only <|im_start|> is shared
    p = [c["prompt_tokens"] for c in calls]
    assert [c["prefix_tokens"] for c in calls] == [0, p[0], p[1] - 2, p[2]]


def test_mini_swe_agent_1_text_trajectory(tmp_path):
    path = tmp_path / "t.traj.json"
    path.write_text(json.dumps({"info": {}, "messages": MINI1, "trajectory_format": "mini-swe-agent-1"}))
    run = load_run(path)
    assert [c.n_messages for c in run.calls] == [2, 4]
    for call, j in zip(run.calls, [2, 4], strict=True):
        assert run.prompt_tokens(call) == chat_format.prompt_token_ids(MINI1[:j], None)  # text mode: no tools
    assert run.calls[0].output_tokens == 11  # usage
    assert run.calls[1].output_tokens == len(chat_format.completion_token_ids(MINI1[4]))  # tokenized
    assert not run.has_times
    with pytest.raises(RunOutputError, match=r"write-premium-ttl.*timestamps"):
        cost_run(path, load_profiles(None, ["write-premium-ttl"]))


def test_bash_tool_matches_mini_swe_agent(monkeypatch, tmp_path):
    monkeypatch.setenv("MSWEA_SILENT_STARTUP", "1")
    monkeypatch.setenv("MSWEA_GLOBAL_CONFIG_DIR", str(tmp_path))
    actions = pytest.importorskip("minisweagent.models.utils.actions_toolcall")
    assert actions.BASH_TOOL == MINI_BASH_TOOL


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[1, 2", "not a JSON file"),
        ('{"info": {}}', "unknown trajectory format"),
        (
            '{"messages": [], "trajectory_format": "other-agent-3"}',
            "unknown trajectory_format 'other-agent-3'",
        ),
        ('{"messages": [{"content": "x"}]}', r"messages\[0\]\.role is missing, expected a string"),
    ],
)
def test_bad_trajectories(tmp_path, content, message):
    path = tmp_path / "x.traj.json"
    path.write_text(content)
    with pytest.raises(RunOutputError, match=message):
        load_run(path)


def test_a_run_without_model_calls_costs_nothing(tmp_path):
    path = tmp_path / "runs" / "mini" / "baseline" / "t" / "1" / "trajectory.json"
    path.parent.mkdir(parents=True)
    path.write_text(
        json.dumps({"messages": [{"role": "system", "content": "s"}, {"role": "exit", "content": "x"}]})
    )
    result = cost_run(path.parent, load_profiles(None, ["paper"]))
    assert result.run_id == "mini/baseline/t/1"
    assert result.calls.num_rows == 0
    assert result.summary["cost_cache"] == 0 and result.summary["prompt_tokens"] == 0


def test_run_id_from_the_run_directory(tmp_path):
    from forgetting.records import run_id_from_path

    assert (
        run_id_from_path(tmp_path / "results" / "runs" / "mini" / "baseline" / "t" / "2")
        == "mini/baseline/t/2"
    )
    assert run_id_from_path(tmp_path / "elsewhere") is None
    # a call log outside a runs/ tree without a run id in its header: the directory's name
    d = tmp_path / "elsewhere"
    d.mkdir()
    write_log(d / "calls.jsonl")
    text = (d / "calls.jsonl").read_text().replace('"run_id": "mini/delayed-turn-tool_output-50/t/1"', '"x": 1')
    (d / "calls.jsonl").write_text(text)
    assert load_run(d, allow_torn=True).run_id == "elsewhere"


def test_paths_that_are_not_runs(tmp_path):
    with pytest.raises(RunOutputError, match="not a run directory"):
        load_run(tmp_path)
    with pytest.raises(RunOutputError, match="no such file"):
        load_run(tmp_path / "missing.json")
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(RunOutputError, match="neither a call log"):
        load_run(tmp_path / "notes.txt")
