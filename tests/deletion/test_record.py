"""The deletion record end to end: what the engine writes into the call log is what the cost
reconstruction and the behaviour labeller read back, for every configuration, in both message
styles, on histories whose reasoning and tool outputs are tiny (0–6 tokens) — so a placeholder
is often longer than the part it replaces. Every call of every run is priced and labelled."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forgetting.behaviour import label_run, load_deletions
from forgetting.cost import cost_run, load_profiles
from forgetting.deletion import DEFAULT_PLACEHOLDERS, Reducer
from forgetting.deletion.names import parse_configuration_name
from forgetting.deletion.policy import PolicyContext
from forgetting.deletion.settings import DeletionSettings
from forgetting.grid import BASELINE, paper_configurations
from forgetting.prompt import tokenizer
from forgetting.prompt.messages import segment
from forgetting.records import PartDeletion, write_run_record
from forgetting.records.calllog import CallLogWriter, read_call_log
from forgetting_testkit.histories import ACTIONS, COMMAND_POOL, SYSTEM, TASK
from forgetting_testkit.reduction_checks import policy_configurations
from forgetting_testkit.trajectories import run_record

#: what the policies read of a study that gives no agent or pricing section (the schema's)
POLICY_DEFAULTS = PolicyContext.from_parts()

#: the schema's deletion settings (a study that gives no ``deletion`` section)
DELETION_DEFAULTS = DeletionSettings.from_section()

#: the paper's 42, the baseline, and every policy beyond the paper at several parameters
CONFIGURATIONS = [*paper_configurations(), parse_configuration_name(BASELINE, "test", context=POLICY_DEFAULTS),
                  *policy_configurations()]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Execute a bash command",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
]
PROFILES = load_profiles(None, ["paper", "vllm-blocks"])

#: parts the issue names (a tool output ``0`` / ``True``, reasoning ``Let me check.``) and others
SHORT = ["", " ", "\n", "0", "1", "True", "False", "None", "ok", "Let me check.", "x = 1", "é", "中文", "🙂", "[]"]
_CHARS = st.sampled_from([*"abc xyz 0123\n.:=()_-'\"", "é", "中", "🙂"])
short_texts = st.one_of(st.sampled_from(SHORT), st.text(_CHARS, max_size=6)).filter(
    lambda t: tokenizer.count(t) <= 6
)


@st.composite
def tiny_histories(draw: Any, style: str) -> list[dict[str, Any]]:
    """A history of 1–7 turns whose reasoning and tool outputs are 0–6 tokens each."""
    msgs: list[dict[str, Any]] = [dict(SYSTEM), dict(TASK)]
    for t in range(1, draw(st.integers(1, 7)) + 1):
        n = draw(st.integers(1, 2)) if style == "tool_calls" else 1
        commands = [draw(st.sampled_from(COMMAND_POOL)) for _ in range(n)]
        reasoning = draw(short_texts)
        if style == "tool_calls":
            calls = [
                {"id": f"call_{t}_{k}", "type": "function",
                 "function": {"name": "bash", "arguments": json.dumps({"command": c})}}
                for k, c in enumerate(commands)
            ]
            msgs.append({"role": "assistant", "content": reasoning, "tool_calls": calls})
            if draw(st.booleans()):
                msgs[-1]["reasoning_content"] = draw(short_texts)
            msgs += [{"role": "tool", "tool_call_id": f"call_{t}_{k}", "content": draw(short_texts)}
                     for k in range(n)]
        else:
            block = f"```mswea_bash_command\n{commands[0]}\n```"
            msgs.append({"role": "assistant", "content": f"{reasoning}\n\n{block}" if reasoning else block})
            msgs.append({"role": "user", "content": draw(short_texts)})
    return msgs


def run_through_proxy(run_dir: Path, messages: list[dict[str, Any]], deletion: Any, seed: int, style: str) -> list:
    """The proxy's writing path: one reducer for the run, each request reduced and logged with
    its ``deleted`` records; the agent's reply is the history's next assistant message. Writes
    the run directory (call log, the agent's trajectory, run.json); returns the reductions."""
    tools = TOOLS if style == "tool_calls" else None
    # the agent's own action pattern
    reducer = Reducer(deletion, seed, actions=ACTIONS[style], settings=DELETION_DEFAULTS)
    turns = segment(messages).turns
    header = {"run_id": f"mini/{deletion.name}/t/1", "seed": seed, "deletion": deletion.as_dict()}
    reductions = []
    with CallLogWriter(run_dir / "calls.jsonl", header, created=0.0) as log:
        for k, turn in enumerate(turns):
            reduction = reducer.reduce(messages[: turn.assistant])
            reply = messages[turn.assistant]
            response = {"content": reply["content"], "reasoning_content": reply.get("reasoning_content"),
                        "tool_calls": reply.get("tool_calls"), "finish_reason": "tool_calls" if tools else "stop"}
            log.append_call(messages=reduction.messages, tools=tools, params={"model": "m"},
                            deleted=reduction.deleted, response=response, usage=None,
                            t_request=float(k), t_response=k + 0.5)
            reductions.append(reduction)
    config: dict[str, Any] = {"agent": {"step_limit": 12}}
    if ACTIONS[style] is not None:  # as mini-swe-agent 2.x records its model config
        config["model"] = {"action_regex": ACTIONS[style].regex}
    trajectory = {
        "info": {"exit_status": "Submitted", "submission": "", "config": config},
        "messages": [*messages, {"role": "exit", "content": "", "extra": {"exit_status": "Submitted"}}],
        "trajectory_format": "mini-swe-agent-1.1",
    }
    (run_dir / "trajectory.json").write_text(json.dumps(trajectory), encoding="utf-8")
    agent = "mini" if style == "tool_calls" else "mini-text"
    write_run_record(run_dir / "run.json", run_record(f"{agent}/{deletion.name}/t/1", seed=seed, turns=len(turns),
                                                       deletion=deletion))
    return reductions


def check_run(run_dir: Path, messages: list[dict[str, Any]], reductions: list, style: str) -> None:
    n_calls = len(reductions)
    logged = [r for red in reductions for r in red.deleted]
    assert len({d.identity for d in logged}) == len(logged)  # each message is logged when first rewritten
    # the call log holds the engine's records, typed, exactly
    log = read_call_log(run_dir / "calls.jsonl")
    assert [c.deleted for c in log.calls] == [red.deleted for red in reductions]
    assert all(isinstance(d, PartDeletion) for c in log.calls for d in c.deleted)
    # priced: one row per call, every count a count, the split adding up
    cost = cost_run(run_dir, PROFILES)
    rows = cost.calls.to_pylist()
    assert [r["call"] for r in rows] == list(range(1, n_calls + 1))
    for r in rows:
        assert min(r["prompt_tokens"], r["cached_tokens"], r["new_tokens"], r["rebilled_tokens"]) >= 0
        assert r["cached_tokens"] + r["new_tokens"] + r["rebilled_tokens"] == r["prompt_tokens"]
        assert min(r["deleted_parts"], r["deleted_tokens"], r["new_deleted_tokens"]) >= 0
    assert rows[-1]["deleted_parts"] == len({(d.turn, d.part) for d in logged})
    assert rows[-1]["deleted_tokens"] == sum(d.tokens_removed for d in logged)
    for d in logged:  # removed means the original left the prompt, however long its stand-in
        assert d.tokens_removed == d.tokens_before if d.mode == "turn" else d.tokens_removed <= d.tokens_before
    for row in cost.run_costs.to_pylist():
        assert row["calls"] == n_calls and row["cost_cache"] >= 0
    # labelled: one row per tool call; deletions seen from the call that first sent them
    behaviour = label_run(run_dir)
    n_tool_calls = sum(len(m.get("tool_calls") or [None]) for m in messages if m["role"] == "assistant")
    assert behaviour.table.num_rows == n_tool_calls == behaviour.summary["n_tool_calls"]
    assert all(label is not None for label in behaviour.table.column("label").to_pylist())
    expected: dict[int, int] = {}
    for k, red in enumerate(reductions, start=1):  # call k's prompt holds k - 1 turns: it issues turn k
        for d in red.deleted:
            if d.part == "tool_output":
                expected.setdefault(d.turn, k)
    assert dict(load_deletions(run_dir / "calls.jsonl").rewritten_from) == expected


PROPS = settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("style", ["tool_calls", "text"])
@pytest.mark.parametrize("deletion", CONFIGURATIONS, ids=lambda d: d.name)
@PROPS
@given(data=st.data(), seed=st.integers(0, 2**32))
def test_every_call_of_every_run_is_priced_and_labelled(deletion, style, data, seed):
    messages = data.draw(tiny_histories(style))
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "runs" / "mini" / deletion.name / "t" / "1"
        run_dir.mkdir(parents=True)
        reductions = run_through_proxy(run_dir, messages, deletion, seed, style)
        check_run(run_dir, messages, reductions, style)


def test_a_placeholder_longer_than_its_part_removes_the_whole_part(tmp_path):
    """The case of the issue by hand: a tool output ``0`` and reasoning ``Let me check.``
    (fewer tokens than their placeholders) replaced at turn level."""
    messages = [dict(SYSTEM), dict(TASK)]
    for t, (reasoning, output) in enumerate([("Let me check.", "0"), ("ok", "True"), ("", "done")], start=1):
        call = {"id": f"c{t}", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
        messages += [{"role": "assistant", "content": reasoning, "tool_calls": [call]},
                     {"role": "tool", "tool_call_id": f"c{t}", "content": output}]
    deletion = parse_configuration_name("immediate-turn-both-100", "test", context=POLICY_DEFAULTS)
    run_dir = tmp_path / "runs" / "mini" / deletion.name / "t" / "1"
    run_dir.mkdir(parents=True)
    reductions = run_through_proxy(run_dir, messages, deletion, 7, "tool_calls")
    check_run(run_dir, messages, reductions, "tool_calls")
    first = {(d.turn, d.part): d for red in reductions for d in red.deleted}
    out = first[(1, "tool_output")]
    assert (out.tokens_before, out.tokens_removed) == (1, 1)
    assert out.tokens_after == tokenizer.count(DEFAULT_PLACEHOLDERS["tool_output"]) > out.tokens_before
    why = first[(1, "reasoning")]
    assert why.tokens_before == why.tokens_removed == tokenizer.count("Let me check.") < why.tokens_after
    rows = cost_run(run_dir, PROFILES).calls.to_pylist()
    assert rows[-1]["deleted_tokens"] == sum(d.tokens_removed for d in first.values())
