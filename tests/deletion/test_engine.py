"""The deletion engine (SPEC §2) in both message styles: what is deleted, what never is,
and the stability that makes prefix-cache accounting meaningful."""

from __future__ import annotations

import copy
import hashlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forgetting.deletion import DEFAULT_PLACEHOLDERS, DeletionSettings, Reducer, reduce_history
from forgetting.deletion.parts import decompose
from forgetting.deletion.policy import HistoryView, Policy, PolicyError, Rewrite
from forgetting.deletion.random_policy import turn_selected
from forgetting.grid import PAPER_CONFIGURATIONS, SCOPE_PARTS, Deletion, paper_configuration
from forgetting.prompt import tokenizer
from forgetting.prompt.messages import actions, segment
from forgetting_testkit.histories import (
    SYSTEM,
    TASK,
    TEXT_ACTIONS,
    action_spans,
    actions_of,
    build,
    histories,
    messages_of_turn,
    observation,
    realistic,
    request_history,
)
from forgetting_testkit.reduction_checks import check_last_turns_intact, check_memoized_equals_pure

#: the schema's deletion settings (a study that gives no ``deletion`` section)
DELETION_DEFAULTS = DeletionSettings.from_section()

SYSTEM_TASK = (SYSTEM, TASK)
PROPS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
configs = st.sampled_from(PAPER_CONFIGURATIONS)
seeds = st.integers(0, 2**63 - 1)


def is_subsequence(small: str, big: str) -> bool:
    it = iter(big)
    return all(ch in it for ch in small)


# ---------------------------------------------------------------------------------------------
# hand-computed examples


def test_delayed_turn_both_100_on_a_text_style_history_by_hand():
    msgs = build(
        "text",
        [
            {
                "reasoning": "THOUGHT: look at utils",
                "outputs": [observation(0, "def count(x):\n    return len(x) - 1")],
            },
            {"reasoning": "THOUGHT: the -1 is wrong", "outputs": [observation(0, "")]},
            {"reasoning": "THOUGHT: run the tests", "outputs": [observation(1, "FAILED test_count")]},
            {"reasoning": "THOUGHT: submit", "outputs": [observation(0, "done")]},
        ],
    )
    r = reduce_history(msgs, paper_configuration("delayed-turn-both-100"), seed=1, actions=actions_of(msgs))
    expect = copy.deepcopy(msgs)
    expect[2]["content"] = "[reasoning deleted]\n\n```mswea_bash_command\ncat file_1_0.py\n```"
    expect[3]["content"] = "[tool output deleted]"
    expect[4]["content"] = "[reasoning deleted]\n\n```mswea_bash_command\ncat file_2_0.py\n```"
    expect[5]["content"] = "[tool output deleted]"
    assert r.messages == expect  # turns 3 and 4 (the last keep_last = 2) untouched
    assert [(x.turn, x.part, x.message_index, x.mode) for x in r.records] == [
        (1, "reasoning", 2, "turn"),
        (1, "tool_output", 3, "turn"),
        (2, "reasoning", 4, "turn"),
        (2, "tool_output", 5, "turn"),
    ]
    # only turn 2 became eligible at this call (4 turns, keep_last 2; the previous call had 3)
    assert {(x.turn, x.part) for x in r.new} == {(2, "reasoning"), (2, "tool_output")}


def test_tool_calls_style_keeps_tool_calls_and_ids_and_rewrites_reasoning_content():
    msgs = build(
        "tool_calls",
        [
            {
                "reasoning": "I will read both files.",
                "reasoning_content": "hidden chain of thought",
                "outputs": [observation(0, "a = 1"), observation(0, "b = 2")],
            },
            {"reasoning": "", "outputs": [observation(0, "ok")]},
        ],
    )
    r = reduce_history(msgs, paper_configuration("immediate-turn-both-100"), seed=5, actions=actions_of(msgs))
    a = r.messages[2]
    assert a["reasoning_content"] == "[reasoning deleted]" and a["content"] == ""
    assert a["tool_calls"] == msgs[2]["tool_calls"]
    assert [m["content"] for m in r.messages[3:5]] == ["[tool output deleted]"] * 2
    assert [m["tool_call_id"] for m in r.messages[3:5]] == ["call_1_0", "call_1_1"]
    # turn 2 has no reasoning at all: only its tool output is a part, so only it is recorded
    assert r.messages[5] == msgs[5]
    assert [(x.turn, x.part) for x in r.records if x.turn == 2] == [(2, "tool_output")]


def test_a_fenced_block_is_an_action_only_in_a_message_without_tool_calls():
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
    msgs = [
        SYSTEM_TASK[0],
        SYSTEM_TASK[1],
        {"role": "assistant", "content": "Plan:\n```bash\nmake test\n```\nthen ls", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "a b"},
        {"role": "assistant", "content": "No tool call this time.\n\n```mswea_bash_command\nls -la\n```"},
        {"role": "user", "content": "Please always call a tool."},
    ]
    d = paper_configuration("immediate-turn-reasoning-100")
    # a tool-calling agent (mini): its actions are tool calls, every text is reasoning
    r = reduce_history(msgs, d, seed=1, actions=None)
    assert r.messages[2]["content"] == "[reasoning deleted]"
    assert r.messages[4]["content"] == "[reasoning deleted]"
    # under mini-swe-agent's text-mode pattern the reply without tool calls keeps its block
    r = reduce_history(msgs, d, seed=1, actions=TEXT_ACTIONS)
    assert r.messages[2]["content"] == "[reasoning deleted]"  # with tool_calls: all of it is reasoning
    assert r.messages[4]["content"] == "[reasoning deleted]\n\n```mswea_bash_command\nls -la\n```"


def test_a_quoted_shell_snippet_in_text_mode_reasoning_is_reasoning():
    """mini-swe-agent 2.x text mode executes only its own ``mswea_bash_command`` block
    (its ``action_regex``): a ```bash or ```sh snippet the reasoning quotes is reasoning and
    is deleted with it; the agent's block stays byte-identical."""
    block = "```mswea_bash_command\npython -m pytest -q\n```"
    quoting = (
        "THOUGHT: the README suggests\n```bash\nmake test\n```\nand the CI runs\n```sh\ntox -e py\n```\n"
        "but I will run pytest directly.\n\n" + block
    )
    msgs = [
        SYSTEM_TASK[0],
        SYSTEM_TASK[1],
        {"role": "assistant", "content": quoting},
        {"role": "user", "content": observation(0, "3 passed")},
        {"role": "assistant", "content": "THOUGHT: done.\n\n```mswea_bash_command\necho COMPLETE\n```"},
        {"role": "user", "content": observation(0, "")},
    ]
    assert [a.command for a in actions(msgs[2], TEXT_ACTIONS)] == ["python -m pytest -q"]
    r = reduce_history(msgs, paper_configuration("immediate-turn-reasoning-100"), seed=1, actions=TEXT_ACTIONS)
    assert r.messages[2]["content"] == "[reasoning deleted]\n\n" + block
    (rec,) = [x for x in r.records if x.turn == 1]
    assert rec.tokens_before == tokenizer.count(quoting[: quoting.index("\n\n```mswea")])
    # token level: the quoted snippets are thinned with the rest of the reasoning
    t = reduce_history(msgs, paper_configuration("immediate-token-reasoning-50"), seed=3, actions=TEXT_ACTIONS)
    assert t.messages[2]["content"].endswith("\n\n" + block)
    (rec,) = [x for x in t.records if x.turn == 1]
    assert rec.tokens_removed == int(rec.tokens_before * 0.5 + 0.5) and rec.tokens_before == tokenizer.count(
        quoting[: quoting.index("\n\n```mswea")]
    )


def test_turn_selection_is_keyed_by_run_seed_and_turn_index_by_hand():
    # the draw for turn t is sha256("{seed}/turn/{t}")'s first 8 bytes as a fraction of 2**64
    expected = [
        t
        for t in range(1, 13)
        if int.from_bytes(hashlib.sha256(f"7/turn/{t}".encode()).digest()[:8], "big") / 2**64 < 0.5
    ]
    assert expected == [t for t in range(1, 13) if turn_selected(7, t, 50)]
    msgs = realistic("text", 14, output_lines=3)
    r = reduce_history(msgs, paper_configuration("delayed-turn-tool_output-50"), seed=7, actions=actions_of(msgs))
    assert sorted({x.turn for x in r.records}) == expected
    assert 0 < len(expected) < 12


def test_history_view_sizes_parts_for_policies():
    msgs = realistic("text", 3, output_lines=4)
    view = HistoryView(msgs, 1, actions=actions_of(msgs))
    assert (view.n_turns, list(view.eligible(2)), view.style) == (3, [1], "text")
    assert view.message_indices(2, "tool_output") == (5,)
    (core,) = view.part_texts(2, "tool_output")
    assert core == msgs[5]["content"].strip()
    assert view.part_tokens(2, "tool_output") == tokenizer.count(core)
    assert view.part_texts(2, "reasoning") == [msgs[4]["content"].split("\n\n```")[0]]


def test_placeholders_come_from_settings():
    msgs = realistic("tool_calls", 3, output_lines=2)
    r = reduce_history(
        msgs,
        paper_configuration("immediate-turn-both-100"),
        seed=1,
        placeholders={"tool_output": "[output removed]"}, actions=actions_of(msgs),
    )
    assert r.messages[3]["content"] == "[output removed]"
    assert r.messages[2]["content"] == DEFAULT_PLACEHOLDERS["reasoning"]


def test_baseline_changes_nothing_and_records_nothing():
    msgs = realistic("tool_calls", 6)
    r = reduce_history(msgs, paper_configuration("baseline"), seed=1, actions=actions_of(msgs))
    assert r.messages == msgs and r.records == () and r.new == ()


# ---------------------------------------------------------------------------------------------
# properties over random histories and the paper's 42 configurations


@PROPS
@given(histories(), configs, seeds)
def test_system_task_and_actions_stay_byte_identical(h, d, seed):
    _style, msgs = h
    original = copy.deepcopy(msgs)
    r = reduce_history(msgs, d, seed, actions=actions_of(msgs))
    assert msgs == original  # the input is untouched
    assert len(r.messages) == len(msgs)
    for i in segment(msgs).preamble:
        assert r.messages[i] == msgs[i]
    for new, old in zip(r.messages, msgs, strict=True):
        assert new.keys() == old.keys()
        assert {k: v for k, v in new.items() if k not in ("content", "reasoning_content")} == {
            k: v for k, v in old.items() if k not in ("content", "reasoning_content")
        }
        if old["role"] == "assistant":
            assert actions(new, actions_of(msgs)) == actions(old, actions_of(msgs))
            assert action_spans(new) == action_spans(old)


@PROPS
@given(histories(), configs, seeds)
def test_the_last_keep_last_turns_are_never_altered(h, d, seed):
    _, msgs = h
    check_last_turns_intact(msgs, d, seed)


@PROPS
@given(histories(min_turns=1), st.sampled_from(["reasoning", "tool_output", "both"]), seeds)
def test_immediate_100_percent_turn_level_rewrites_every_earlier_turn(h, scope, seed):
    _style, msgs = h
    r = reduce_history(msgs, paper_configuration(f"immediate-turn-{scope}-100"), seed, actions=actions_of(msgs))
    view = HistoryView(msgs, seed, actions=actions_of(msgs))
    for turn in range(1, view.n_turns + 1):
        for part in SCOPE_PARTS[scope]:
            for i in view.message_indices(turn, part):
                old = decompose(msgs[i], part, actions_of(msgs))
                new = decompose(r.messages[i], part, actions_of(msgs))
                if old is None:
                    assert r.messages[i] == msgs[i]  # nothing to delete
                else:  # no trace of the original text is left, only the placeholder
                    assert new is not None and new.cores == (DEFAULT_PLACEHOLDERS[part],)


@PROPS
@given(histories(min_turns=1), st.sampled_from(list(PAPER_CONFIGURATIONS)), seeds)
def test_immediate_token_level_rewrites_every_earlier_turn(h, d, seed):
    _style, msgs = h
    if d.timing != "immediate" or d.granularity != "token":
        d = paper_configuration(f"immediate-token-{d.scope}-50")
    r = reduce_history(msgs, d, seed, actions=actions_of(msgs))
    view = HistoryView(msgs, seed, actions=actions_of(msgs))
    expected = {
        (t, p, i)
        for t in range(1, view.n_turns + 1)
        for p in d.parts
        for i in view.message_indices(t, p)
        if decompose(msgs[i], p, actions_of(msgs)) is not None
    }
    assert {(x.turn, x.part, x.message_index) for x in r.records} == expected


@PROPS
@given(histories(), st.sampled_from([d for d in PAPER_CONFIGURATIONS if d.scope != "both"]), seeds)
def test_one_scope_leaves_the_other_part_untouched(h, d, seed):
    _, msgs = h
    r = reduce_history(msgs, d, seed, actions=actions_of(msgs))
    for new, old in zip(r.messages, msgs, strict=True):
        if (old["role"] == "assistant") == (d.scope == "tool_output"):
            assert new == old
    assert {x.part for x in r.records} <= {d.scope}


@PROPS
@given(
    histories(min_turns=1),
    st.sampled_from([25, 50, 75]),
    st.sampled_from(["reasoning", "tool_output", "both"]),
    seeds,
)
def test_token_level_removes_its_share_and_keeps_the_rest_in_order(h, amount, scope, seed):
    _style, msgs = h
    r = reduce_history(msgs, paper_configuration(f"immediate-token-{scope}-{amount}"), seed, actions=actions_of(msgs))
    for x in r.records:
        # exact draw: round(n * X / 100) of each message's n scoped tokens, half up
        assert x.tokens_removed == int(x.tokens_before * amount / 100 + 0.5)
        new, old = r.messages[x.message_index], msgs[x.message_index]
        for key in ("content", "reasoning_content"):
            if isinstance(old.get(key), str):
                assert is_subsequence(new[key], old[key])
                assert "\ufffd" not in new[key]


@PROPS
@given(histories(min_turns=3), configs, seeds, st.data())
def test_each_reduced_prompt_extends_the_previous_except_at_newly_eligible_turns(h, d, seed, data):
    _, msgs = h
    n = len(segment(msgs).turns)
    ks = sorted(data.draw(st.lists(st.integers(0, n), min_size=3, max_size=3, unique=True)))
    # one per run, memoized, as the proxy keeps it
    reducer = Reducer(d, seed, actions=actions_of(msgs), settings=DELETION_DEFAULTS)
    prev = None
    for k in ks:
        hist = request_history(msgs, k)
        r = reducer.reduce(hist)
        assert r == reduce_history(hist, d, seed, actions=actions_of(msgs))  # memoized == pure
        if prev is not None:
            k0, r0 = prev
            newly = set(range(max(0, k0 - d.keep_last) + 1, max(0, k - d.keep_last) + 1))
            changed = {i for t in newly for i in messages_of_turn(msgs, t)}
            for i in range(len(r0.messages)):
                if i not in changed:
                    assert r.messages[i] == r0.messages[i]
            assert set(r0.records) <= set(r.records)
            assert {x.turn for x in r.records} - {x.turn for x in r0.records} <= newly
        prev = (k, r)


@PROPS
@given(histories(min_turns=1), configs, seeds)
def test_new_parts_are_those_first_rewritten_at_each_call(h, d, seed):
    _, msgs = h
    n = len(segment(msgs).turns)
    reducer = Reducer(d, seed, actions=actions_of(msgs), settings=DELETION_DEFAULTS)
    seen: list = []
    for k in range(n + 1):
        r = reducer.reduce(request_history(msgs, k))
        assert set(r.new) == set(r.records) - set(seen)
        seen += r.new
    assert sorted(seen, key=lambda x: (x.turn, x.message_index)) == sorted(
        r.records, key=lambda x: (x.turn, x.message_index)
    )


@pytest.mark.parametrize(
    "name", ["delayed-turn-both-50", "delayed-token-tool_output-50", "immediate-token-reasoning-25"]
)
def test_same_seed_identical_and_different_seed_differs(name):
    msgs = realistic("tool_calls", 30, output_lines=8)
    d = paper_configuration(name)
    a, b, c = (reduce_history(msgs, d, s, actions=actions_of(msgs)) for s in (11, 11, 12))
    assert a == b
    assert a.messages != c.messages


def test_a_policy_that_changes_its_mind_is_caught():
    class Flaky(Policy):
        name = "flaky"

        def decide(self, view: HistoryView) -> list[Rewrite]:
            return [Rewrite(1, "tool_output", "turn")] if view.n_turns % 2 else []

    msgs = realistic("text", 4, output_lines=2)
    d = Deletion(name="flaky", policy="flaky")
    reducer = Reducer(d, 1, policy=Flaky(d, DeletionSettings.from_section()), actions=actions_of(msgs),
                      settings=DELETION_DEFAULTS)
    with pytest.raises(PolicyError, match="not stable"):
        reducer.reduce(msgs)  # 4 turns: undecided; the previous call (3 turns) decided it


@PROPS
@given(histories(min_turns=1), configs, seeds, st.data())
def test_the_memoized_reducer_equals_the_pure_function_on_any_sequence_of_histories(h, d, seed, data):
    # cut anywhere (mid-turn too, e.g. a request ending with an assistant message), grow, shrink
    _, msgs = h
    check_memoized_equals_pure(msgs, d, seed, data.draw(st.lists(st.integers(1, len(msgs)), min_size=1, max_size=6)))


def test_a_turn_whose_observations_arrive_later_is_rewritten_whole():
    msgs = realistic("tool_calls", 3, output_lines=2)
    d = paper_configuration("immediate-turn-tool_output-100")
    reducer = Reducer(d, 1, actions=actions_of(msgs), settings=DELETION_DEFAULTS)
    cut = segment(msgs).turns[-1].assistant + 1  # the last turn's assistant message, no tool output yet
    reducer.reduce(msgs[:cut])
    assert reducer.reduce(msgs) == reduce_history(msgs, d, 1, actions=actions_of(msgs))
    assert reducer.reduce(msgs).messages[-1]["content"] == "[tool output deleted]"


@PROPS
@given(histories(), st.data())
def test_a_segmentation_resumed_from_its_head_is_the_whole_ones(h, data):
    _, msgs = h
    n = data.draw(st.integers(0, len(msgs)))
    head = segment(msgs[:n])
    assert segment(msgs, head=(head, n)) == segment(msgs)


def test_a_policy_that_newly_rewrites_an_old_turn_is_applied_in_turn_order():
    class Late(Policy):
        """From the fourth turn on, rewrites the first turn's tool output and the reasoning of
        every turn before the last: at the fourth call, turn 1 is new behind reused turns 2, 3."""

        name = "late"

        def decide(self, view: HistoryView) -> list[Rewrite]:
            out = [Rewrite(t, "reasoning", "turn") for t in range(1, view.n_turns)]
            return out + ([Rewrite(1, "tool_output", "turn")] if view.n_turns >= 4 else [])

    msgs = realistic("tool_calls", 6, output_lines=3)
    d = Deletion(name="late", policy="late")
    settings_ = DeletionSettings.from_section()
    reducer = Reducer(d, 1, policy=Late(d, settings_), actions=None, settings=DELETION_DEFAULTS)
    turns = segment(msgs).turns
    for k in range(2, len(turns) + 1):
        hist = msgs[: turns[k].assistant] if k < len(turns) else msgs
        got = reducer.reduce(hist)
        pure = Reducer(d, 1, policy=Late(d, settings_), actions=None, settings=DELETION_DEFAULTS).reduce(hist)
        assert got == pure
        assert [(r.turn, r.part) for r in got.records] == sorted((r.turn, r.part) for r in got.records)
        if k == 4:
            assert [(r.turn, r.part) for r in got.new] == [(1, "tool_output"), (3, "reasoning")]


def test_a_rewrite_is_checked_when_made_and_orders_by_turn_then_part():
    with pytest.raises(PolicyError, match="unknown part 'notes'"):
        Rewrite(1, "notes", "turn")
    with pytest.raises(PolicyError, match="needs an amount"):
        Rewrite(1, "reasoning", "token")
    a, b = Rewrite(2, "reasoning", "token", 50.0), Rewrite(1, "tool_output", "turn")
    assert sorted([a, b]) == [b, a] and a == Rewrite(turn=2, part="reasoning", mode="token", amount=50)
    assert {a: 1}[Rewrite(2, "reasoning", "token", 50.0)] == 1
