"""Hand-built trajectories for the behaviour tests, in the three formats the loader reads,
and run records (``run.json``) for hand-built run directories.

Each builder writes what the real agent would write for a small session on three files;
the tests compute the expected labels and re-fetches by hand from the contents below.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from forgetting.foundation.layout import RUN_JSON
from forgetting.grid import BASELINE_DELETION, Deletion
from forgetting.records import PartDeletion, RunRecord, write_run_record

A_PY = "def f():\n    return 1\n\n\ndef g():\n    return 2\n"  # 4 distinct lines
B_PY = "x = 1\ny = 2\nz = 3\n"  # 3 distinct lines
C_PY = "x = 1\ny = 2\nz = 3\ndef f():\nnew_line\n"  # 4 of its 5 lines seen before: 0.8
D_PY = "x = 1\ny = 2\nz = 3\nq1\nq2\n"  # 3 of 5 seen before: 0.6
NL_A = "".join(f"{i:6}\t{line}\n" for i, line in enumerate(A_PY.splitlines(), start=1))
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"


def json_observation(output: str, returncode: int = 0) -> str:
    """mini.yaml's observation template (2.x tool calling)."""
    return f'{{\n  "returncode": {returncode},\n  "output": {json.dumps(output)}\n}}'


def text_observation(output: str, returncode: int = 0) -> str:
    """The text templates' observation (1.x, 2.x text mode)."""
    return f"<returncode>{returncode}</returncode>\n<output>\n{output}</output>"


def _tool_turn(i: int, commands: list[str], outputs: list[str], *, raw: bool = True) -> list[dict[str, Any]]:
    calls = [
        {
            "id": f"call_{i}_{j}",
            "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": c})},
        }
        for j, c in enumerate(commands)
    ]
    msgs: list[dict[str, Any]] = [
        {
            "role": "assistant",
            "content": f"turn {i}",
            "tool_calls": calls,
            "extra": {
                "actions": [{"command": c, "tool_call_id": f"call_{i}_{j}"} for j, c in enumerate(commands)]
            },
        }
    ]
    for j, out in enumerate(outputs):
        m: dict[str, Any] = {
            "role": "tool",
            "tool_call_id": f"call_{i}_{j}",
            "content": json_observation(out),
        }
        if raw:
            m["extra"] = {"raw_output": out, "returncode": 0}
        msgs.append(m)
    return msgs


#: assistant messages in the prompt of each of toolcall_trajectory's 10 model calls
#: (call 2's reply was rejected and dropped from the history: calls 2 and 3 see one)
TOOLCALL_PROMPT_TURNS = [0, 1, 1, 2, 3, 4, 5, 6, 7, 8]


def toolcall_trajectory(*, step_limit: int = 250) -> dict[str, Any]:
    """mini-swe-agent 2.x (tool calling), 10 model calls, 9 turns. Call 2's reply had no
    tool call: 2.x keeps no assistant message for it, only the format-error message (with
    the raw response in ``extra``), so it is no turn. Turns (= the calls after it − 1):

    1 cat a.py (read)                2 grep a.py; ls (two searches)
    3 nl -ba a.py | sed -n (read, re-fetch of 1, distance 2)
    4 cat b.py (read)                5 sed -n b.py && head a.py (re-fetch; source 4 by the tie rule)
    6 cat c.py (0.8: re-fetch of 5)  7 cat d.py (0.6: not)
    8 cat empty.py (read, no lines)  9 submit (ends the run: no observation)
    """
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Fix the bug."},
    ]
    msgs += _tool_turn(1, ["cat a.py"], [A_PY])
    msgs.append(
        {
            "role": "user",
            "content": "Tool call error: no tool calls found",
            "extra": {
                "interrupt_type": "FormatError",
                "response": {"choices": [{"message": {"content": "hm"}}]},
            },
        }
    )
    msgs += _tool_turn(2, ["grep -n def a.py", "ls"], ["1:def f():\n5:def g():\n", "a.py\nb.py\n"])
    msgs += _tool_turn(3, ["nl -ba a.py | sed -n '1,6p'"], [NL_A], raw=False)
    msgs += _tool_turn(4, ["cat b.py"], [B_PY])
    msgs += _tool_turn(5, ["sed -n '1,2p' b.py && head -2 a.py"], ["x = 1\ny = 2\ndef f():\n    return 1\n"])
    msgs += _tool_turn(6, ["cat c.py"], [C_PY])
    msgs += _tool_turn(7, ["cat d.py"], [D_PY])
    msgs += _tool_turn(8, ["cat empty.py"], [""])
    msgs += _tool_turn(9, [SUBMIT], [])
    msgs.append(
        {"role": "exit", "content": "diff", "extra": {"exit_status": "Submitted", "submission": "diff"}}
    )
    return {
        "info": {
            "exit_status": "Submitted",
            "submission": "diff",
            "model_stats": {"instance_cost": 0.0, "api_calls": 10},
            "config": {"agent": {"step_limit": step_limit}},
            "mini_version": "2.4.6",
        },
        "messages": msgs,
        "trajectory_format": "mini-swe-agent-1.1",
    }


def text_trajectory() -> dict[str, Any]:
    """mini-swe-agent 1.x (text actions, observations as user messages, no ``extra``), 6 calls:

    1 cat a.py (read)                 2 two blocks: a format error, nothing run
    3 cat -n a.py (read, re-fetch of 1, distance 2)
    4 cat big.py: too long, head and tail shown (read: 4 new lines)
    5 grep -rn x . (search)           6 submit (1.x: the submission comes back as a user message)
    """

    def block(cmd: str) -> str:
        return f"THOUGHT: next step.\n\n```bash\n{cmd}\n```"

    catn = "".join(f"     {i}\t{line}\n" for i, line in enumerate(A_PY.splitlines(), start=1))
    long_obs = (
        "<returncode>0</returncode>\n<warning>\nThe output of your last command was too long.\n</warning>"
        "<output_head>\nhead1\nhead2\n</output_head>\n"
        "<elided_chars>\n12000 characters elided\n</elided_chars>\n"
        "<output_tail>\ntail1\ntail2\n</output_tail>"
    )
    msgs = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Fix the bug."},
        {"role": "assistant", "content": block("cat a.py")},
        {"role": "user", "content": text_observation(A_PY)},
        {"role": "assistant", "content": block("ls") + "\n" + block("pwd")},
        {
            "role": "user",
            "content": "Please always provide EXACTLY ONE action in triple backticks, found 2 actions.",
        },
        {"role": "assistant", "content": block("cd /testbed && cat -n a.py")},
        {"role": "user", "content": text_observation(catn)},
        {"role": "assistant", "content": block("cat big.py")},
        {"role": "user", "content": long_obs},
        {"role": "assistant", "content": block("grep -rn x .")},
        {"role": "user", "content": text_observation("b.py:1:x = 1\n")},
        {
            "role": "assistant",
            "content": block("echo MINI_SWE_AGENT_FINAL_OUTPUT && git add -A && git diff --cached"),
        },
        {"role": "user", "content": "diff --git a/a.py b/a.py\n"},
    ]
    return {
        "info": {"exit_status": "Submitted", "submission": "diff"},
        "messages": msgs,
        "trajectory_format": "mini-swe-agent-1",
    }


def _trae_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"call_id": call_id, "name": name, "arguments": arguments, "id": None}


def _trae_result(call_id: str, result: str | None, error: str | None = None) -> dict[str, Any]:
    return {"call_id": call_id, "success": error is None, "result": result, "error": error, "id": None}


def trae_trajectory(
    *,
    calls: list[list[tuple[str, dict[str, Any], str | None]]] | None = None,
    max_steps: int = 200,
    success: bool = True,
    final_result: str = "done",
) -> dict[str, Any]:
    """A Trae agent trajectory. ``calls``: per model call, its tool calls (name, arguments,
    result text or None for a call that was not executed). The results of the last call
    appear only in ``agent_steps``, as in a real file."""
    view_a = "Here's the result of running `cat -n` on /testbed/a.py:\n" + NL_A
    view_a12 = "Here's the result of running `cat -n` on /testbed/a.py:\n" + NL_A.split("     3\t")[0]
    edited = A_PY.replace("return 1", "return 10")
    if calls is None:
        calls = [
            [("str_replace_based_edit_tool", {"command": "view", "path": "/testbed/a.py"}, view_a)],
            [
                (
                    "sequentialthinking",
                    {
                        "thought": "hmm",
                        "thought_number": 1,
                        "total_thoughts": 1,
                        "next_thought_needed": False,
                    },
                    "Thought recorded",
                ),
                ("bash", {"command": "grep -rn 'def f' /testbed"}, "/testbed/a.py:1:def f():"),
            ],
            [
                (
                    "str_replace_based_edit_tool",
                    {"command": "view", "path": "/testbed/a.py", "view_range": [1, 2]},
                    view_a12,
                )
            ],
            [
                (
                    "str_replace_based_edit_tool",
                    {
                        "command": "str_replace",
                        "path": "/testbed/a.py",
                        "old_str": "return 1\n",
                        "new_str": "return 10\n",
                    },
                    "The file /testbed/a.py has been edited. Here's the result of running `cat -n`",
                )
            ],
            [("bash", {"command": "cat /testbed/a.py"}, edited)],
            [("task_done", {}, None)],
        ]
    interactions = []
    steps = []
    pending: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an expert AI software engineering agent."},
        {"role": "user", "content": "[Problem statement]: Fix the bug."},
    ]
    for i, turn in enumerate(calls, start=1):
        tcs = [_trae_call(f"c{i}_{j}", name, args) for j, (name, args, _) in enumerate(turn)]
        interactions.append(
            {
                "timestamp": "2025-01-01T00:00:00",
                "provider": "openrouter",
                "model": "qwen",
                "input_messages": pending,
                "response": {
                    "content": f"step {i}",
                    "model": "qwen",
                    "finish_reason": "tool_calls",
                    "usage": {"input_tokens": 1, "output_tokens": 1},
                    "tool_calls": tcs or None,
                },
                "tools_available": ["bash", "str_replace_based_edit_tool", "sequentialthinking", "task_done"],
            }
        )
        results = [_trae_result(f"c{i}_{j}", out) for j, (_, _, out) in enumerate(turn) if out is not None]
        steps.append(
            {
                "step_number": i,
                "state": "completed",
                "tool_calls": tcs or None,
                "tool_results": results or None,
            }
        )
        pending = [{"role": "user", "content": None, "tool_result": r} for r in results]
    return {
        "task": "Fix the bug.",
        "start_time": "2025-01-01T00:00:00",
        "end_time": "2025-01-01T00:10:00",
        "provider": "openrouter",
        "model": "qwen",
        "max_steps": max_steps,
        "llm_interactions": interactions,
        "agent_steps": steps,
        "success": success,
        "final_result": final_result,
        "execution_time": 1.0,
    }


def edit_at(*path: Any, value: Any = None, delete: bool = False) -> Callable[[Any], None]:
    """A mutation of a JSON document: set (or delete) the field at ``path`` (keys and indices)."""

    def mutate(doc: Any) -> None:
        for key in path[:-1]:
            doc = doc[key]
        if delete:
            del doc[path[-1]]
        else:
            doc[path[-1]] = value

    return mutate


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return path


def write_call_log(
    path: Path,
    deleted_by_call: dict[int, list[PartDeletion]],
    prompt_turns: list[int] = TOOLCALL_PROMPT_TURNS,
) -> Path:
    """A proxy call log with one call per entry of ``prompt_turns`` (the number of
    assistant messages in that call's prompt); ``deleted_by_call[i]`` is call i's ``deleted``."""
    from forgetting.records.calllog import CallLogWriter

    header = {"run_id": "test", "deletion": "delayed-turn-tool_output-50", "seed": 1}
    with CallLogWriter(path, header) as w:
        for i, n in enumerate(prompt_turns, start=1):
            messages: list[dict[str, Any]] = [
                {"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "Fix the bug."},
            ]
            for k in range(1, n + 1):
                messages += [
                    {"role": "assistant", "content": f"turn {k}"},
                    {"role": "user", "content": f"obs {k}"},
                ]
            w.append_call(
                messages=messages,
                tools=None,
                params={},
                deleted=deleted_by_call.get(i, []),
                response={"content": "ok"},
                usage=None,
                t_request=float(i),
                t_response=float(i) + 0.5,
            )
    return path


def deletion(turn: int, part: str = "tool_output", mode: str = "turn") -> PartDeletion:
    """A deletion record of ``turn``'s ``part`` (40 tokens: replaced by a placeholder of 6, or
    half of them removed) in the histories :func:`write_call_log` logs."""
    index = 2 * turn + (1 if part == "tool_output" else 0)
    if mode == "turn":
        return PartDeletion(turn, part, index, mode, tokens_before=40, tokens_after=6, tokens_removed=40)
    return PartDeletion(turn, part, index, mode, tokens_before=40, tokens_after=21, tokens_removed=20)


def run_record(run_id: str, **fields: Any) -> RunRecord:
    """A whole run record for ``agent/configuration/task/repeat``: a submitted run of 10 turns
    of the scripted backend; ``fields`` replace any of its fields."""
    agent, configuration, task, repeat = run_id.split("/")
    deletion = BASELINE_DELETION if configuration == BASELINE_DELETION.name else Deletion(configuration)
    record = RunRecord(
        run_id=run_id, agent=agent, configuration=configuration, task=task, repeat=int(repeat), seed=1,
        deletion=deletion, status="submitted", exit_status="Submitted", turns=10, turn_cap=200, agent_calls=10,
        started=1.7e9, wall_s=1.0, model_s=0.5, agent_exit_code=None, patch_bytes=0, error=None,
        model_backend="scripted", versions={},
    )
    return dataclasses.replace(record, **fields)


def write_run_json(run_dir: Path, **fields: Any) -> Path:
    """``run_dir/run.json`` for the run the directory's path names (``…/runs/A/C/T/R``)."""
    run_id = "/".join(run_dir.parts[-4:])
    run_dir.mkdir(parents=True, exist_ok=True)
    write_run_record(run_dir / RUN_JSON, run_record(run_id, **fields))
    return run_dir / RUN_JSON
