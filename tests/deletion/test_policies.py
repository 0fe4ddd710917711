"""The policies beyond the paper under the engine's contract (the same properties as the paper's
42: untouched system/task/actions, retention delay, stability across growing histories,
memoized == pure, determinism), and each policy's decisions by hand on small histories."""

from __future__ import annotations

import copy
import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forgetting.deletion import Reducer, reduce_history
from forgetting.deletion.batch_policy import batch_frontier
from forgetting.deletion.files import action_files, command_files, same_file
from forgetting.deletion.gate_policy import CacheAwareGate, Prices, committed_after, estimate, remaining_calls
from forgetting.deletion.names import parse_configuration_name
from forgetting.deletion.policy import HistoryView, PolicyContext
from forgetting.deletion.random_policy import turn_selected
from forgetting.deletion.registry import make_policy
from forgetting.deletion.reuse_policy import ReuseAware, stale_turns
from forgetting.deletion.settings import DeletionSettings
from forgetting.prompt.messages import Action, actions, segment
from forgetting.study.policies import build_policies
from forgetting_testkit.histories import (
    ACTIONS,
    action_spans,
    actions_of,
    build,
    histories,
    observation,
    realistic,
    request_history,
)
from forgetting_testkit.reduction_checks import (
    CONTEXT,
    POLICY_NAMES,
    check_last_turns_intact,
    check_memoized_equals_pure,
    policy_configurations,
)

#: what the policies read of a study that gives no agent or pricing section (the schema's)
POLICY_DEFAULTS = PolicyContext.from_parts()

#: the schema's deletion settings (a study that gives no ``deletion`` section)
DELETION_DEFAULTS = DeletionSettings.from_section()

PROPS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
seeds = st.integers(0, 2**63 - 1)
POLICIES = policy_configurations()
policies_st = st.sampled_from(POLICIES)


def gate_expensive_writes() -> object:
    """A gate whose cache writes cost 100× its cached reads: it rarely rewrites."""
    (d,) = build_policies(
        [{"policy": "gate", "scope": "both", "granularity": "turn", "amount": 100, "keep_last": 0}],
        "k",
        CONTEXT,
    )
    return type(d)(**{**d.__dict__, "name": "gate-costly", "params": {**d.params, "cache_write": 9.0}})


ALL = [*POLICIES, gate_expensive_writes()]
all_st = st.sampled_from(ALL)


# ---------------------------------------------------------------------------------------------
# properties


@PROPS
@given(histories(pooled=True), all_st, seeds)
def test_system_task_and_actions_stay_byte_identical(h, d, seed):
    _, msgs = h
    original = copy.deepcopy(msgs)
    r = reduce_history(msgs, d, seed, actions=actions_of(msgs))
    assert msgs == original and len(r.messages) == len(msgs)
    for i in segment(msgs).preamble:
        assert r.messages[i] == msgs[i]
    for new, old in zip(r.messages, msgs, strict=True):
        assert new.keys() == old.keys()
        rest = {k: v for k, v in new.items() if k not in ("content", "reasoning_content")}
        assert rest == {k: v for k, v in old.items() if k not in ("content", "reasoning_content")}
        if old["role"] == "assistant":
            syntax = actions_of(msgs)
            assert actions(new, syntax) == actions(old, syntax) and action_spans(new) == action_spans(old)
    assert {x.part for x in r.records} <= set(d.parts)


@PROPS
@given(histories(pooled=True), all_st, seeds)
def test_the_last_keep_last_turns_are_never_altered(h, d, seed):
    _, msgs = h
    check_last_turns_intact(msgs, d, seed)


@PROPS
@given(histories(min_turns=2, pooled=True), all_st, seeds)
def test_rewritten_turns_stay_rewritten_the_same_way_as_the_history_grows(h, d, seed):
    _, msgs = h
    n = len(segment(msgs).turns)
    # one per run, as the proxy keeps it; it also checks stability
    reducer = Reducer(d, seed, actions=actions_of(msgs), settings=DELETION_DEFAULTS)
    prev = None
    for k in range(n + 1):
        hist = request_history(msgs, k)
        r = reducer.reduce(hist)
        assert r == reduce_history(hist, d, seed, actions=actions_of(msgs))  # memoized == pure
        if prev is not None:
            before = {(x.turn, x.part, x.message_index) for x in prev.records}
            after = {(x.turn, x.part, x.message_index) for x in r.records}
            assert before <= after
            assert set(prev.records) <= set(r.records)  # same rewrite, same sizes
            newly = {i for _, _, i in after - before}
            for i in range(len(prev.messages)):
                if i not in newly:
                    assert r.messages[i] == prev.messages[i]
            assert {x.message_index for x in r.new} == newly
        prev = r


@PROPS
@given(histories(min_turns=1, pooled=True), all_st, seeds, st.data())
def test_the_memoized_reducer_equals_the_pure_function_on_any_sequence_of_histories(h, d, seed, data):
    _, msgs = h
    check_memoized_equals_pure(msgs, d, seed, data.draw(st.lists(st.integers(1, len(msgs)), min_size=1, max_size=6)))


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_same_seed_identical_results(name):
    msgs = realistic("tool_calls", 14, output_lines=6)
    d = parse_configuration_name(name, "test", CONTEXT)
    a, b = reduce_history(msgs, d, 11, actions=actions_of(msgs)), reduce_history(msgs, d, 11, actions=actions_of(msgs))
    assert a == b
    # all delete something on 14 turns, except the gate with a 2-call horizon: halving the
    # reasoning of old turns never pays for re-billing the 3 turns after them
    assert bool(a.records) == (name != "gate2-keep3-token-reasoning-50")
    if a.records and (d.granularity == "token" or (d.amount or 100) < 100):  # keyed draws: other seed, others
        assert reduce_history(msgs, d, 12, actions=actions_of(msgs)).messages != a.messages


# ---------------------------------------------------------------------------------------------
# longer delays and batching, by hand


def test_keep8_is_the_paper_policy_with_eight_turns_kept():
    msgs = realistic("text", 12, output_lines=2)
    d = parse_configuration_name("keep8-turn-tool_output-100", "test", context=POLICY_DEFAULTS)
    r = reduce_history(msgs, d, 1, actions=actions_of(msgs))
    assert sorted({x.turn for x in r.records}) == [1, 2, 3, 4]  # 12 turns, the last 8 kept
    assert d.timing is None  # not one of the paper's two timings


def test_batch_frontier_by_hand():
    # keep_last 2, every 3: eligible 0 1 2 3 4 5 6 7 → rewritten up to 0 0 0 3 3 3 6 6
    assert [batch_frontier(n, 2, 3) for n in range(2, 10)] == [0, 0, 0, 3, 3, 3, 6, 6]
    assert [batch_frontier(n, 0, 2) for n in range(6)] == [0, 0, 2, 2, 4, 4]


def test_batched_rewriting_breaks_the_prefix_once_per_batch():
    msgs = realistic("text", 10, output_lines=2)
    d = parse_configuration_name("batch3-delayed-turn-tool_output-100", "test", context=POLICY_DEFAULTS)
    reducer = Reducer(d, 5, actions=actions_of(msgs), settings=DELETION_DEFAULTS)
    newly = {}
    for k in range(11):
        r = reducer.reduce(request_history(msgs, k))
        newly[k] = sorted({x.turn for x in r.new})
    # with 5, 8 turns: 3 and 6 eligible → turns 1-3, then 4-6 rewritten at once; never between
    assert {k: v for k, v in newly.items() if v} == {5: [1, 2, 3], 8: [4, 5, 6]}
    assert sorted({x.turn for x in r.records}) == [1, 2, 3, 4, 5, 6]


def test_batched_turn_level_selection_is_the_papers_draw():
    msgs = realistic("tool_calls", 9, output_lines=2)
    d = parse_configuration_name("batch2-immediate-turn-both-50", "test", context=POLICY_DEFAULTS)
    r = reduce_history(msgs, d, 7, actions=actions_of(msgs))
    expected = [t for t in range(1, 9) if turn_selected(7, t, 50)]  # 9 turns → frontier 8
    assert sorted({x.turn for x in r.records}) == expected


# ---------------------------------------------------------------------------------------------
# observation masking, by hand


def test_masking_keeps_the_last_m_outputs_and_names_the_omitted_lines():
    outputs = ["a\nb\nc", "one line", "x\ny", "last but one", "last"]
    specs = [{"reasoning": f"THOUGHT: {i}", "outputs": [observation(0, o)]} for i, o in enumerate(outputs)]
    msgs = build("text", specs)
    mask2 = parse_configuration_name("mask2", "test", context=POLICY_DEFAULTS)
    r = reduce_history(msgs, mask2, 1, actions=actions_of(msgs))
    # an observation is "<returncode>0</returncode>\n<output>\n{output}\n</output>": 3 more lines
    assert [r.messages[i]["content"] for i in (3, 5, 7)] == [
        "[6 lines of old tool output omitted]",
        "[4 lines of old tool output omitted]",
        "[5 lines of old tool output omitted]",
    ]
    assert r.messages[8:] == msgs[8:]  # turns 4 and 5 verbatim
    assert all(r.messages[i] == msgs[i] for i in (0, 1, 2, 4, 6))  # system, task, assistant messages


def test_mask_placeholder_must_name_the_lines():
    from forgetting.foundation.errors import ConfigError

    with pytest.raises(ConfigError, match=r"k\[0\]\.placeholder: .* containing \{lines\}"):
        build_policies([{"policy": "mask", "keep_last": 3, "placeholder": "[gone]"}], "k", context=POLICY_DEFAULTS)
    (d,) = build_policies([{"policy": "mask", "keep_last": 1, "placeholder": "({lines} lines hidden)"}], "k",
                          context=POLICY_DEFAULTS)
    msgs = realistic("text", 2, output_lines=2)
    assert reduce_history(msgs, d, 1, actions=actions_of(msgs)).messages[3]["content"] == "(5 lines hidden)"


# ---------------------------------------------------------------------------------------------
# reuse-aware deletion, by hand


def test_files_named_by_actions():
    assert command_files("nl -ba src/a.py | sed -n '1,20p'") == {"src/a.py"}
    assert command_files("sed -i 's/a.b/c.d/g' x/y.py && cat ./z.txt") == {"x/y.py", "z.txt"}
    assert command_files("cd /testbed && python -m pytest tests/test_a.py::test_x -q") == {"tests/test_a.py"}
    assert command_files("cat > new.py <<'EOF'\nprint(1)\nEOF") == {"new.py"}
    assert command_files("timeout 10 bash -c 'head -5 q.cfg'") == {"q.cfg"}
    assert command_files("grep -rn foo src/ && ls -la && find . -name '*.py'") == frozenset()
    editor = Action("str_replace_based_edit_tool", {"command": "view", "path": "/testbed/src/a.py"})
    assert action_files(editor) == {"/testbed/src/a.py"}
    assert same_file("/testbed/src/a.py", "src/a.py") and same_file("a.py", "src/a.py")
    assert not same_file("src/a.py", "src/ba.py") and not same_file("a.py", "b.py")


REUSE_COMMANDS = [
    "cat a.py",  # 1
    "cat b.py",  # 2
    "grep -n count a.py",  # 3: re-reads a.py
    "ls",  # 4: names no file
    "sed -i 's/x/y/' src/a.py",  # 5: edits a.py (same file: src/a.py ends with /a.py)
    "cat b.py",  # 6: re-reads b.py, but turn 2 went stale at 4
    "cat c.py",  # 7
]


def reuse_history(style: str) -> list[dict]:
    return build(
        style,
        [
            {"reasoning": f"THOUGHT: {i}", "outputs": [observation(0, f"out {i}")], "commands": [c]}
            for i, c in enumerate(REUSE_COMMANDS, start=1)
        ],
    )


@pytest.mark.parametrize(
    ("keep_last", "expected"),
    [
        # stale_after 2, keep_last 0, per history length n (hand-traced in docs of the fold):
        # n=4: turn 2 last used at 2 → stale; n=6: turn 4 (no file) → stale;
        # n=7: turns 1, 3 and 5 last used at 5 → stale
        (0, {1: set(), 2: set(), 3: set(), 4: {2}, 5: {2}, 6: {2, 4}, 7: {1, 2, 3, 4, 5}}),
        # keep_last 3: a turn also has to be eligible (t ≤ n − 3)
        (3, {1: set(), 2: set(), 3: set(), 4: set(), 5: {2}, 6: {2}, 7: {1, 2, 3, 4}}),
    ],
)
@pytest.mark.parametrize("style", ["text", "tool_calls"])
def test_reuse_aware_deletion_by_hand(style, keep_last, expected):
    msgs = reuse_history(style)
    (d,) = build_policies([{"policy": "reuse", "stale_after": 2, "keep_last": keep_last}], "k", context=POLICY_DEFAULTS)
    policy = make_policy(d, DELETION_DEFAULTS)
    assert isinstance(policy, ReuseAware)
    for n, stale in expected.items():
        view = HistoryView(request_history(msgs, n), 1, actions=actions_of(msgs))
        assert policy.stale(view) == stale, n
        assert stale_turns([policy._files[t] for t in range(n)], 2, keep_last) == stale  # unmemoized fold
    r = reduce_history(msgs, d, 1, actions=actions_of(msgs))
    assert sorted({x.turn for x in r.records}) == sorted(expected[7])
    assert all(x.part == "tool_output" for x in r.records)


# ---------------------------------------------------------------------------------------------
# the cache-aware gate, by hand

PAPER = Prices(cached_input=0.09, cache_write=0.45)


def test_gate_arithmetic_by_hand():
    # H = min(horizon, turn_cap − n): 60 − 5 = 55 calls left, horizon 10
    assert remaining_calls(5, 60, 10) == 10 and remaining_calls(5, 60, None) == 55
    assert remaining_calls(58, 60, 10) == 2 and remaining_calls(61, 60, None) == 0
    # saving 10 · 300 · 0.09 = 270 < cost 1000 · (0.45 − 0.09) = 360: hold
    e = estimate(5, 300, 1000, turn_cap=60, horizon=10, prices=PAPER)
    assert (e.remaining, e.saving, e.cost, e.fires) == (10, pytest.approx(270.0), pytest.approx(360.0), False)
    # 400 tokens: 360 = 360, not more: hold; 401: 360.9 > 360: rewrite
    assert not estimate(5, 400, 1000, turn_cap=60, horizon=10, prices=PAPER).fires
    assert estimate(5, 401, 1000, turn_cap=60, horizon=10, prices=PAPER).fires
    # nothing re-billed (the rewrite touches only this call's new messages): any saving pays
    assert estimate(5, 1, 0, turn_cap=60, horizon=None, prices=PAPER).fires
    # no call left, or nothing saved: never
    assert not estimate(60, 500, 0, turn_cap=60, horizon=None, prices=PAPER).fires
    assert not estimate(5, 0, 0, turn_cap=60, horizon=None, prices=PAPER).fires


def words(text: str) -> int:
    """A stand-in tokenizer for hand arithmetic: one token per whitespace-separated word."""
    return len(text.split())


def gate_history() -> list[dict]:
    """Text style; every assistant message is 7 words, tool outputs are 40, 10, 5, 100, 20, 8."""
    sizes = [40, 10, 5, 100, 20, 8]
    msgs = [{"role": "system", "content": "you are an agent"}, {"role": "user", "content": "fix the bug"}]
    for t, n in enumerate(sizes, start=1):
        msgs.append({"role": "assistant", "content": f"THOUGHT: step {t}\n\n```mswea_bash_command\ncat f{t}.py\n```"})
        msgs.append({"role": "user", "content": " ".join(["w"] * n)})
    return msgs


def test_gate_decisions_by_hand_on_a_small_history():
    (d,) = build_policies(
        [
            {
                "policy": "gate",
                "horizon": 5,
                "scope": "tool_output",
                "granularity": "turn",
                "amount": 100,
                "timing": "delayed",
            }
        ],
        "k",
        PolicyContext.from_parts({"agent": {"turn_cap": 60}}),
    )
    assert d.name == "gate5-delayed-turn-tool_output-100"
    assert (d.params["cached_input"], d.params["cache_write"]) == (0.09, 0.45)  # the paper's price sheet
    gate = make_policy(d, DELETION_DEFAULTS)
    assert isinstance(gate, CacheAwareGate)
    msgs = gate_history()
    steps = gate.fold(HistoryView(msgs, 3, counter=words, actions=actions_of(msgs)))
    est = {m: s[1] for m, s in enumerate(steps, start=1)}
    committed = {m: sorted(rw.turn for rw in s[0]) for m, s in enumerate(steps, start=1)}
    # the placeholder "[tool output deleted]" is 3 words; H = min(5, 60 − m) = 5 throughout
    assert est[1] is None and est[2] is None  # nothing eligible yet (keep_last 2)
    # m = 3: turn 1's output pending: D = 40 − 3 = 37; R = obs 1 after (3) + turn 2 (7 + 10) = 20
    # saving 5 · 37 · 0.09 = 16.65 > cost 20 · 0.36 = 7.2: rewrite
    assert (est[3].saved_tokens, est[3].rebilled_tokens, est[3].fires) == (37, 20, True)
    assert est[3].saving == pytest.approx(16.65) and est[3].cost == pytest.approx(7.2)
    # m = 4: turn 2 pending: D = 10 − 3 = 7; R = 3 + turn 3 (7 + 5) = 15: 3.15 < 5.4, hold
    assert (est[4].saved_tokens, est[4].rebilled_tokens, est[4].fires) == (7, 15, False)
    # m = 5: turns 2, 3 pending: D = 7 + 2 = 9; R = 3 + (7 + 3) + turn 4 (7 + 100) = 120: hold
    assert (est[5].saved_tokens, est[5].rebilled_tokens, est[5].fires) == (9, 120, False)
    # m = 6: turns 2-4 pending: D = 7 + 2 + 97 = 106; R = 3 + 10 + 10 + turn 5 (7 + 20) = 50
    # saving 5 · 106 · 0.09 = 47.7 > cost 50 · 0.36 = 18: rewrite all three at once
    assert (est[6].saved_tokens, est[6].rebilled_tokens, est[6].fires) == (106, 50, True)
    assert committed == {1: [], 2: [], 3: [1], 4: [1], 5: [1], 6: [1, 2, 3, 4]}
    assert committed_after(steps) == [3, 6]
    # decide() on each history length is the fold's state there (a rewrite, once made, stays)
    for n in range(7):
        view = HistoryView(request_history(msgs, n), 3, counter=words, actions=actions_of(msgs))
        assert sorted(rw.turn for rw in gate.decide(view)) == (committed[n] if n else [])


def test_gate_with_expensive_writes_holds_longer_and_immediate_new_output_is_free():
    msgs = gate_history()
    (d,) = build_policies(
        [
            {
                "policy": "gate",
                "horizon": 1,
                "scope": "tool_output",
                "granularity": "turn",
                "amount": 100,
                "keep_last": 0,
            }
        ],
        "k",
        PolicyContext.from_parts({"agent": {"turn_cap": 60}}),
    )
    steps = make_policy(d, DELETION_DEFAULTS).fold(HistoryView(msgs, 3, counter=words, actions=actions_of(msgs)))
    # keep_last 0: at m = 1 only turn 1's own output is pending: nothing cached to re-bill
    assert (steps[0][1].saved_tokens, steps[0][1].rebilled_tokens, steps[0][1].fires) == (37, 0, True)
    # every later call: the newest output is free to rewrite, so each is rewritten at once
    assert committed_after(steps) == [1, 2, 3, 4, 5, 6]


def test_gate_prices_come_from_the_configured_profile(repo_root):
    ctx = PolicyContext.from_parts(
        {"agent": {"turn_cap": 200}, "pricing": {"dir": str(repo_root / "resources/pricing"), "primary": "paper"}}
    )
    entry = {"policy": "gate", "scope": "both", "granularity": "turn", "amount": 50, "timing": "delayed"}
    (d,) = build_policies([{**entry, "pricing": "write-premium-ttl"}], "k", ctx)
    assert d.params["pricing"] == "write-premium-ttl" and d.params["cache_write"] > d.params["input"]
    from forgetting.foundation.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^k\[0\]\.pricing: .*no pricing profile 'nope'"):
        build_policies([{**entry, "pricing": "nope"}], "k", ctx)


@st.composite
def sized_histories(draw) -> list[dict]:
    """Histories whose tool outputs range from empty to long, so a gate both holds and rewrites."""
    style = draw(st.sampled_from(["tool_calls", "text"]))
    n = draw(st.integers(3, 10))
    specs = []
    for t in range(1, n + 1):
        lines = draw(st.integers(0, 60))
        specs.append(
            {
                "reasoning": f"THOUGHT: step {t} " + "why " * draw(st.integers(0, 30)),
                "outputs": [observation(0, "\n".join(f"{i}\tvalue = {i} * {t}" for i in range(lines)))],
            }
        )
    return build(style, specs)


GATES = [
    parse_configuration_name(n, "test", PolicyContext.from_parts({"agent": {"turn_cap": 30}}))
    for n in ("gate-delayed-turn-tool_output-100", "gate4-immediate-turn-both-100", "gate6-keep3-token-both-50")
]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sized_histories(), st.sampled_from(GATES), seeds)
def test_a_gate_rewrite_once_made_is_permanent(msgs, d, seed):
    n = len(segment(msgs).turns)
    steps = make_policy(d, DELETION_DEFAULTS).fold(HistoryView(msgs, seed, actions=actions_of(msgs)))
    for (before, _), (after, _) in itertools.pairwise(steps):
        assert before <= after  # committed rewrites only grow
    # raises PolicyError if a decision were dropped
    reducer = Reducer(d, seed, actions=actions_of(msgs), settings=DELETION_DEFAULTS)
    seen: set = set()
    for k in range(n + 1):
        r = reducer.reduce(request_history(msgs, k))
        assert seen <= set(r.records)
        seen = set(r.records)


# ---------------------------------------------------------------------------------------------
# the same proxy and call log


@pytest.mark.parametrize("style", ["tool_calls", "text"])
def test_policies_run_through_the_proxy_and_are_logged(tmp_path, style):
    from forgetting.records.calllog import read_call_log
    from forgetting.run.proxy import start_proxy
    from forgetting_testkit.fakes.openai_upstream import FakeUpstream
    from forgetting_testkit.proxy_client import FAST, drive

    for name in ("mask2", "batch2-delayed-turn-tool_output-100", "reuse2-immediate", "gate-immediate-turn-both-100"):
        d, log_dir = parse_configuration_name(name, "test", context=POLICY_DEFAULTS), tmp_path / name
        with (
            FakeUpstream(style=style) as up,
            start_proxy(up.url, d, 9, log_dir, f"mini/{name}/t/1", settings=FAST, actions=ACTIONS[style]) as px,
        ):
            sent = drive(px.url, style, 6)
        log = read_call_log(log_dir / "calls.jsonl")
        assert log.header["deletion"] == d.as_dict()  # every parameter, e.g. the gate's prices
        for history, received, call in zip(sent, up.chat_requests(), log.calls, strict=True):
            expected = reduce_history(history, d, 9, actions=ACTIONS[style])
            assert received.body["messages"] == expected.messages == log.messages(call)
            assert call.deleted == expected.deleted
        assert reduce_history(sent[-1], d, 9, actions=ACTIONS[style]).records, name  # each deletes something in 6 calls
