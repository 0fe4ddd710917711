"""Labels, re-fetches, deletions, looping and capped on hand-built trajectories.

Every expected value is worked out by hand in the comments from the file contents in
``forgetting_testkit.trajectories`` (a.py: 4 distinct lines, b.py: 3, c.py: 5 of which 4 seen,
d.py: 5 of which 3 seen).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from forgetting.behaviour import label_run, load_trajectory
from forgetting.behaviour.refetch import distinct_lines
from forgetting.foundation.errors import RunOutputError, UserError
from forgetting.records.schemas import RUNS_SCHEMA, TOOL_CALLS_SCHEMA
from forgetting_testkit.trajectories import (
    A_PY,
    deletion,
    text_observation,
    text_trajectory,
    toolcall_trajectory,
    trae_trajectory,
    write_call_log,
    write_json,
    write_run_json,
)


def rows(result) -> list[dict]:
    return result.table.to_pylist()


def test_distinct_lines_strip_editor_numbers_blanks_and_whitespace() -> None:
    text = "     1\tdef f():\n     2\t    return 1\n     3\t\n  \nplain line  \n    12\tdef f():\n"
    assert distinct_lines(text) == {"def f():", "return 1", "plain line"}
    # a number without the tab is content, not a prefix
    assert distinct_lines("1 apple\n2:pear") == {"1 apple", "2:pear"}


def test_toolcall_trajectory_labels_and_refetches(tmp_path: Path) -> None:
    path = write_json(tmp_path / "x.traj.json", toolcall_trajectory())
    result = label_run(path)
    got = [(r["turn"], r["index"], r["label"]) for r in rows(result)]
    # the rejected reply of call 2 is no turn; turn 2 issued two calls
    assert got == [
        (1, 0, "read"),
        (2, 0, "search"),
        (2, 1, "search"),
        (3, 0, "read"),
        (4, 0, "read"),
        (5, 0, "read"),
        (6, 0, "read"),
        (7, 0, "read"),
        (8, 0, "read"),
        (9, 0, "submit"),
    ]
    facts = {
        r["turn"]: (r["n_distinct_lines"], r["overlap"], r["is_refetch"], r["refetch_distance"])
        for r in rows(result)
        if r["is_read"]
    }
    assert facts == {
        1: (4, 0.0, False, None),  # first read: 4 lines, nothing seen before
        3: (4, 1.0, True, 2),  # nl -ba prefixes stripped → turn 1's 4 lines; source 1
        4: (3, 0.0, False, None),  # b.py: new
        # {x = 1, y = 2, def f():, return 1}: all seen. No earlier read holds more than half
        # (turns 1, 3 and 4 hold 2 of 4 each): the largest share, most recent on the tie = 4
        5: (4, 1.0, True, 1),
        6: (5, 0.8, True, 1),  # c.py: 4 of 5 seen = 0.8 ≥ 0.8; turn 5 holds 3 of 5 (> half)
        7: (5, 0.6, False, None),  # d.py: 3 of 5 = 0.6
        8: (0, None, False, None),  # an empty output: a read with no lines, never a re-fetch
    }
    # without a call log nothing was deleted
    assert [r["was_deleted"] for r in rows(result) if r["is_refetch"]] == [False, False, False]
    # non-reads carry no re-fetch facts
    non_reads = [r for r in rows(result) if not r["is_read"]]
    assert all(r["n_distinct_lines"] is None and r["is_refetch"] is None for r in non_reads)
    s = result.summary
    assert (s["n_tool_calls"], s["n_reads"], s["n_refetches"]) == (10, 7, 3)
    assert s["refetch_rate"] == pytest.approx(3 / 7)
    assert s["median_refetch_distance"] == 1.0  # median of 2, 1, 1
    assert (s["looping"], s["capped"]) == (False, False)
    # turns: model calls made (10), not assistant messages (9)
    assert result.run_id == "" and result.turns == 10 and result.exit_status == "Submitted"
    assert result.table.schema == TOOL_CALLS_SCHEMA


def test_threshold_is_a_parameter(tmp_path: Path) -> None:
    path = write_json(tmp_path / "x.traj.json", toolcall_trajectory())
    # at 0.6 the d.py read (3 of 5 seen) becomes a re-fetch too; at 0.9 c.py (0.8) drops out
    assert label_run(path, threshold=0.6).summary["n_refetches"] == 4
    assert label_run(path, threshold=0.9).summary["n_refetches"] == 2
    with pytest.raises(UserError, match="threshold"):
        label_run(path, threshold=0)


def _run_dir(tmp_path: Path, run_json: dict | None = None) -> Path:
    run = tmp_path / "results" / "runs" / "mini" / "delayed-turn-tool_output-50" / "demo__task-1" / "1"
    write_json(run / "trajectory.json", toolcall_trajectory())
    # Which turn each call issues: call k ≥ 3 issues turn k − 1 (call 2's reply was rejected).
    # call 4 (issues turn 3) newly rewrites turn 1's tool output; call 8 (turn 7) turn 4's;
    # call 9 (turn 8) turn 3's; call 5 rewrites turn 4's reasoning (not a tool output)
    write_call_log(
        run / "calls.jsonl",
        {
            4: [deletion(1)],
            5: [deletion(4, part="reasoning")],
            8: [deletion(4, mode="token")],
            9: [deletion(3)],
        },
    )
    if run_json is not None:
        write_run_json(run, **run_json)
    return run


def test_was_deleted_and_deleted_vs_kept_from_the_call_log(tmp_path: Path) -> None:
    run = _run_dir(tmp_path, {"status": "submitted", "turns": 10, "agent": "mini"})
    result = label_run(run)
    assert result.run_id == "mini/delayed-turn-tool_output-50/demo__task-1/1"
    refetched = {r["turn"]: r["was_deleted"] for r in rows(result) if r["is_refetch"]}
    # turn 3 re-fetches turn 1, rewritten in the prompt of call 4, the call that issued turn 3
    #   → deleted (comparing call index 4 with turn 3 would miss it)
    # turn 5 re-fetches turn 4: its output rewritten only from turn 7 on (the reasoning
    #   record of call 5 does not count) → kept
    # turn 6 re-fetches turn 5: never rewritten → kept
    assert refetched == {3: True, 5: False, 6: False}
    s = result.summary
    assert (s["n_refetches_deleted"], s["n_refetches_kept"]) == (1, 2)
    # read outputs with lines: turns 1, 3, 4, 5, 6, 7
    #   1: source of the turn-3 re-fetch, deleted by then        → deleted, re-fetched
    #   3: never a source, rewritten from turn 8 on              → deleted
    #   4: source of the turn-5 re-fetch, rewritten only from 7  → kept, re-fetched
    #   5: source of the turn-6 re-fetch, never deleted          → kept, re-fetched
    #   6, 7: never sources, never deleted                       → kept
    assert (s["n_outputs_deleted"], s["n_outputs_deleted_refetched"]) == (2, 1)
    assert (s["n_outputs_kept"], s["n_outputs_kept_refetched"]) == (4, 2)
    assert set(s) <= set(RUNS_SCHEMA.names)


def test_a_bare_trajectory_with_a_call_log(tmp_path: Path) -> None:
    path = write_json(tmp_path / "x.traj.json", toolcall_trajectory())
    # call 3 (it issues turn 2) rewrites turn 1: the turn-3 re-fetch of turn 1 recovers deleted content
    log = write_call_log(tmp_path / "calls.jsonl", {3: [deletion(1)]})
    assert label_run(path, call_log=log).summary["n_refetches_deleted"] == 1
    # … and a rewrite first sent with turn 4 comes too late for it
    log = write_call_log(tmp_path / "late.jsonl", {5: [deletion(1)]})
    assert label_run(path, call_log=log).summary["n_refetches_deleted"] == 0


def labelled(path: Path, agent: str, *fields: str) -> tuple[Any, list[tuple[Any, ...]]]:
    """The behaviour labels of the trajectory at ``path`` (its agent checked) and ``fields`` of each row."""
    result = label_run(path)
    assert result.agent == agent
    return result, [tuple(r[f] for f in fields) for r in rows(result)]


def test_text_trajectory(tmp_path: Path) -> None:
    result, got = labelled(write_json(tmp_path / "old.traj.json", text_trajectory()), "mini-text",
                           "turn", "label", "n_distinct_lines", "is_refetch")
    assert got == [
        (1, "read", 4, False),
        # turn 2 had two action blocks: a format error, nothing ran
        (3, "read", 4, True),  # cat -n prefixes stripped → the 4 lines of turn 1
        (4, "read", 4, False),  # the elided output: the head and tail the agent saw
        (5, "search", None, None),
        (6, "submit", None, None),
    ]
    assert rows(result)[1]["refetch_distance"] == 2
    assert result.summary["refetch_rate"] == pytest.approx(1 / 3)


MINI_TEXT_REGEX = r"```mswea_bash_command\s*\n(.*?)\n```"  # what mini-swe-agent 2.x records


def _text_2x(action_regex: str | None, replies: list[str]) -> dict:
    """A mini-swe-agent 2.x text-mode trajectory whose replies store no ``extra.actions``."""
    msgs = [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "Fix it."}]
    for reply in replies:
        msgs += [{"role": "assistant", "content": reply}, {"role": "user", "content": text_observation(A_PY)}]
    model = {"action_regex": action_regex} if action_regex is not None else {}
    return {"info": {"config": {"model": model}}, "messages": msgs, "trajectory_format": "mini-swe-agent-1.1"}


def test_text_mode_actions_are_the_agents_own_blocks_not_quoted_snippets(tmp_path: Path) -> None:
    """mini-swe-agent 2.x runs only the block its action_regex matches: a ```bash snippet the
    reasoning quotes is no action (and not a second block making the reply a format error)."""
    quoting = (
        "THOUGHT: the docs say\n```bash\ngrep -rn f .\n```\nbut I read it.\n\n```mswea_bash_command\ncat a.py\n```"
    )
    plain = "THOUGHT: again.\n\n```mswea_bash_command\ncat a.py\n```"
    traj = load_trajectory(write_json(tmp_path / "t.traj.json", _text_2x(MINI_TEXT_REGEX, [quoting, plain])))
    assert [(e.turn, e.arguments["command"]) for e in traj.events] == [(1, "cat a.py"), (2, "cat a.py")]
    # another pattern recorded by the agent's config is the one used
    custom = _text_2x(r"<cmd>(.*?)</cmd>", ["THOUGHT: x\n```mswea_bash_command\nls\n```\n<cmd>cat a.py</cmd>"])
    traj = load_trajectory(write_json(tmp_path / "c.traj.json", custom))
    assert [e.arguments["command"] for e in traj.events] == ["cat a.py"]
    # no recorded pattern: the default of the installed 2.x (the same block)
    traj = load_trajectory(write_json(tmp_path / "d.traj.json", _text_2x(None, [quoting])))
    assert [e.arguments["command"] for e in traj.events] == ["cat a.py"]
    # 1.x trajectories keep 1.x's ```bash pattern (test_text_trajectory); with neither a
    # recorded pattern nor a format, the file cannot say what its actions are
    bare = _text_2x(None, [plain])
    del bare["trajectory_format"]
    with pytest.raises(RunOutputError, match="records neither its action_regex"):
        load_trajectory(write_json(tmp_path / "b.traj.json", bare))


def test_trae_trajectory(tmp_path: Path) -> None:
    path = write_json(tmp_path / "trae.json", trae_trajectory())
    result, got = labelled(path, "trae", "turn", "index", "tool", "label")
    assert got == [
        (1, 0, "str_replace_based_edit_tool", "read"),
        (2, 0, "sequentialthinking", "other"),
        (2, 1, "bash", "search"),
        (3, 0, "str_replace_based_edit_tool", "read"),
        (4, 0, "str_replace_based_edit_tool", "edit"),
        (5, 0, "bash", "read"),
        (6, 0, "task_done", "submit"),
    ]
    reads = [r for r in rows(result) if r["is_read"]]
    # 1: view header dropped, numbers stripped: 4 lines
    # 3: view_range [1, 2] → {def f():, return 1}, both seen → re-fetch of turn 1, distance 2
    # 5: after the edit {def f():, return 10, def g():, return 2}: 3 of 4 seen = 0.75 → not
    assert [
        (r["turn"], r["n_distinct_lines"], r["overlap"], r["is_refetch"], r["refetch_distance"])
        for r in reads
    ] == [
        (1, 4, 0.0, False, None),
        (3, 2, 1.0, True, 2),
        (5, 4, 0.75, False, None),
    ]
    assert rows(result)[3]["summary"] == "view /testbed/a.py [1, 2]"
    assert result.summary["capped"] is False and result.exit_status == "Submitted"


def test_trae_last_results_come_from_agent_steps(tmp_path: Path) -> None:
    data = trae_trajectory()
    calls = [[("bash", {"command": "cat /testbed/b.py"}, "x = 1\ny = 2\nz = 3")]]
    path = write_json(tmp_path / "trae.json", trae_trajectory(calls=calls))
    traj = load_trajectory(path)
    assert traj.events[0].output == "x = 1\ny = 2\nz = 3"  # only agent_steps had it
    assert data["llm_interactions"][1]["input_messages"][0]["tool_result"]["call_id"] == "c1_0"


def test_trae_failed_tool_output_as_the_model_saw_it(tmp_path: Path) -> None:
    data = trae_trajectory(calls=[[("bash", {"command": "cat nope.py"}, "")], [("task_done", {}, None)]])
    data["agent_steps"][0]["tool_results"] = [
        {"call_id": "c1_0", "success": False, "result": "", "error": "cat: nope.py: No such file", "id": None}
    ]
    data["llm_interactions"][1]["input_messages"] = [
        {"role": "user", "content": None, "tool_result": data["agent_steps"][0]["tool_results"][0]}
    ]
    traj = load_trajectory(write_json(tmp_path / "t.json", data))
    assert traj.events[0].output == "Tool call failed with error:\ncat: nope.py: No such file"


def _repeat_calls(n: int, then: str | None = None) -> list:
    calls = [[("bash", {"command": "python reproduce.py"}, "Traceback ...")] for _ in range(n)]
    if then:
        calls.append([("bash", {"command": then}, "ok")])
    return calls


def test_looping_needs_the_window_of_identical_calls(tmp_path: Path) -> None:
    ten = write_json(tmp_path / "ten.json", trae_trajectory(calls=_repeat_calls(10, then="ls")))
    nine = write_json(tmp_path / "nine.json", trae_trajectory(calls=_repeat_calls(9, then="ls")))
    assert label_run(ten).summary["looping"] is True
    assert label_run(ten).longest_streak == 10
    assert label_run(nine).summary["looping"] is False
    assert label_run(nine, looping_window=9).summary["looping"] is True
    # the same command with different arguments breaks the streak
    mixed = [*_repeat_calls(5), [("bash", {"command": "python reproduce.py --v"}, "x")], *_repeat_calls(5)]
    assert label_run(write_json(tmp_path / "mixed.json", trae_trajectory(calls=mixed))).longest_streak == 5


def test_capped_from_the_trajectories(tmp_path: Path) -> None:
    # Trae: 3 calls with max_steps 3 and no success
    trae = trae_trajectory(
        calls=_repeat_calls(3),
        max_steps=3,
        success=False,
        final_result="Task execution exceeded maximum steps without completion.",
    )
    r = label_run(write_json(tmp_path / "trae.json", trae))
    assert (r.summary["capped"], r.exit_status, r.turns) == (True, "LimitsExceeded", 3)
    # mini: LimitsExceeded after step_limit calls
    mini = toolcall_trajectory(step_limit=10)
    mini["info"]["exit_status"] = "LimitsExceeded"
    assert label_run(write_json(tmp_path / "m.traj.json", mini)).summary["capped"] is True
    # … but a LimitsExceeded below the step limit (a cost limit) is not a cap
    mini["info"]["config"]["agent"]["step_limit"] = 50
    assert label_run(write_json(tmp_path / "m.traj.json", mini)).summary["capped"] is False
    # the caller's turn cap overrides the trajectory's
    assert label_run(tmp_path / "m.traj.json", turn_cap=10).summary["capped"] is True
    # a submitted run is never capped
    assert (
        label_run(write_json(tmp_path / "s.traj.json", toolcall_trajectory(step_limit=10))).summary["capped"]
        is False
    )


def test_capped_from_run_json(tmp_path: Path) -> None:
    run = _run_dir(tmp_path, {"status": "capped", "turns": 10, "agent": "mini"})
    assert label_run(run).summary["capped"] is True
    write_run_json(run, status="submitted", turns=10)
    assert label_run(run, turn_cap=10).summary["capped"] is False


def test_unknown_format_is_one_line_error(tmp_path: Path) -> None:
    bad = write_json(tmp_path / "weird.json", {"history": []})
    with pytest.raises(RunOutputError, match=r"weird\.json: unknown trajectory format"):
        label_run(bad)
    notjson = tmp_path / "broken.traj.json"
    notjson.write_text("{not json")
    with pytest.raises(RunOutputError, match=r"broken\.traj\.json: not a JSON file"):
        label_run(notjson)
    with pytest.raises(RunOutputError, match="given as 'trae'"):
        label_run(write_json(tmp_path / "x.traj.json", toolcall_trajectory()), agent="trae")
