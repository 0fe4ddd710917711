"""Trae agent trajectories (bytedance/trae-agent's ``TrajectoryRecorder`` JSON).

The file holds ``llm_interactions`` — one per model call, in order; each has the
``input_messages`` *new* to that call and the ``response`` with its ``tool_calls``
(``call_id``, ``name``, ``arguments``) — and ``agent_steps``, whose ``tool_results`` repeat
the results of each step's calls. A tool result reaches the model as the next call's input
message ``{"role": "user", "tool_result": {call_id, success, result, error}}``; the last
call's results appear only in ``agent_steps``. Both places are read, matched by
``call_id``.

The text the agent received for a result is what Trae's Chat Completions clients send:
the result, then ``Tool call failed with error:`` and the error when there is one, stripped.
The payload drops the header line the editor tool puts before a ``view``
(``Here's the result of running `cat -n` on PATH:``).

A ``task_done`` call ends the run without being executed; it is a tool call with an empty
output. Turn = the interaction's position (1-based).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from forgetting.behaviour.events import ToolCallEvent, Trajectory
from forgetting.errors import RunOutputError

_VIEW_HEADER = re.compile(
    r"\A(Here's the result of running `cat -n` on [^\n]*:|"
    r"Here's the files and directories up to 2 levels deep in [^\n]*:)\n"
)
_EXCEEDED = "exceeded maximum steps"


def result_text(result: Mapping[str, Any]) -> str:
    """A tool result as the model received it."""
    text = ""
    if result.get("result"):
        text += f"{result['result']}\n"
    if result.get("error"):
        text += f"Tool call failed with error:\n{result['error']}"
    return text.strip()


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, Mapping):
        return dict(raw)
    if isinstance(raw, str):
        try:
            value = json.loads(raw) if raw else {}
        except ValueError:
            return {"_raw": raw}
        return dict(value) if isinstance(value, Mapping) else {"_raw": raw}
    return {}


def _results(data: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    found: dict[str, Mapping[str, Any]] = {}
    for step in data.get("agent_steps") or []:
        for r in (step or {}).get("tool_results") or []:
            if isinstance(r, Mapping) and r.get("call_id"):
                found.setdefault(str(r["call_id"]), r)
    for it in data.get("llm_interactions") or []:
        for m in (it or {}).get("input_messages") or []:
            r = m.get("tool_result") if isinstance(m, Mapping) else None
            if isinstance(r, Mapping) and r.get("call_id"):
                found[str(r["call_id"])] = r  # what the model was sent wins
    return found


def load_trae(data: Mapping[str, Any], source: Path) -> Trajectory:
    interactions = data.get("llm_interactions")
    if not isinstance(interactions, list):
        raise RunOutputError(f"{source}: 'llm_interactions' is not a list; not a Trae agent trajectory")
    results = _results(data)
    events: list[ToolCallEvent] = []
    for turn, it in enumerate(interactions, start=1):
        response = (it or {}).get("response") or {}
        for j, call in enumerate(response.get("tool_calls") or []):
            if not isinstance(call, Mapping):
                continue
            r = results.get(str(call.get("call_id")))
            output = result_text(r) if r is not None else ""
            payload = _VIEW_HEADER.sub("", output, count=1)
            events.append(
                ToolCallEvent(
                    turn, j, str(call.get("name", "")), _arguments(call.get("arguments")), output, payload
                )
            )
    turns = len(interactions)
    max_steps = data.get("max_steps")
    turn_cap = int(max_steps) if isinstance(max_steps, int) and max_steps > 0 else None
    final = str(data.get("final_result") or "")
    if data.get("success"):
        exit_status = "Submitted"
    elif _EXCEEDED in final or (turn_cap is not None and turns >= turn_cap):
        exit_status = "LimitsExceeded"
    elif data.get("end_time"):
        exit_status = "Error"
    else:
        exit_status = ""
    return Trajectory(source, "trae", "trae", tuple(events), turns, exit_status, turn_cap)
