"""Tool calls of a Trae agent trajectory (parsed by :mod:`forgetting.records.trae`).

Each response's tool calls, matched by ``call_id`` to their results (the next call's input
messages, else ``agent_steps``). The text the agent received for a result is what Trae's
Chat Completions clients send (:meth:`~forgetting.records.trae.TraeToolResult.text`). The
payload drops the header line the editor tool puts before a ``view`` (``Here's the result
of running `cat -n` on PATH:``).

A ``task_done`` call ends the run without being executed; it is a tool call with an empty
output. Turn = the interaction's position (1-based).
"""

from __future__ import annotations

import re

from forgetting.behaviour.events import ToolCallEvent, Trajectory
from forgetting.records.trae import TraeTrajectory

_VIEW_HEADER = re.compile(
    r"\A(Here's the result of running `cat -n` on [^\n]*:|"
    r"Here's the files and directories up to 2 levels deep in [^\n]*:)\n"
)
_EXCEEDED = "exceeded maximum steps"


def trae_events(traj: TraeTrajectory) -> Trajectory:
    """The tool calls of a parsed Trae agent trajectory, and how the run ended."""
    results = traj.results()
    events: list[ToolCallEvent] = []
    for turn, it in enumerate(traj.interactions, start=1):
        for j, call in enumerate(it.tool_calls):
            r = results.get(call.call_id) if call.call_id is not None else None
            output = r.text() if r is not None else ""
            payload = _VIEW_HEADER.sub("", output, count=1)
            events.append(ToolCallEvent(turn, j, call.name, dict(call.arguments), output, payload))
    turns = len(traj.interactions)
    turn_cap = traj.max_steps if traj.max_steps is not None and traj.max_steps > 0 else None
    if traj.success:
        exit_status = "Submitted"
    elif _EXCEEDED in traj.final_result or (turn_cap is not None and turns >= turn_cap):
        exit_status = "LimitsExceeded"
    elif traj.end_time:
        exit_status = "Error"
    else:
        exit_status = ""
    return Trajectory(traj.source, "trae", "trae", tuple(events), turns, exit_status, turn_cap)
