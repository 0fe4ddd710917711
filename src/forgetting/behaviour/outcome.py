"""Run outcomes the trajectory shows (SPEC §3): looping and capped."""

from __future__ import annotations

import json
from collections.abc import Sequence

from forgetting.behaviour.events import ToolCallEvent


def call_key(event: ToolCallEvent) -> str:
    """Identity of a tool call for looping: the tool and its arguments (string values with
    surrounding whitespace removed; key order ignored)."""
    args = {k: v.strip() if isinstance(v, str) else v for k, v in event.arguments.items()}
    return json.dumps([event.tool, args], sort_keys=True, ensure_ascii=False, default=str)


def longest_identical_streak(events: Sequence[ToolCallEvent]) -> int:
    """The longest run of consecutive identical tool calls (0 when there are none)."""
    best = streak = 0
    prev: str | None = None
    for e in events:
        key = call_key(e)
        streak = streak + 1 if key == prev else 1
        prev = key
        best = max(best, streak)
    return best


def is_looping(events: Sequence[ToolCallEvent], window: int = 10) -> bool:
    """``window`` consecutive identical tool calls (same tool, same arguments)."""
    return longest_identical_streak(events) >= window


def is_capped(turns: int, turn_cap: int | None, exit_status: str, status: str | None = None) -> bool:
    """The run reached the turn cap.

    ``run.json``'s ``status``, when there is one, decides (the runner saw how the run ended).
    Otherwise: an exit status ``LimitsExceeded`` with at least ``turn_cap`` calls (any count
    when the cap is unknown); no exit status at all (a trajectory cut short) with at least
    ``turn_cap`` calls; never when the agent submitted or stopped on an error.
    """
    if status:
        return status == "capped"
    if exit_status == "LimitsExceeded":
        return turn_cap is None or turns >= turn_cap
    if not exit_status:
        return turn_cap is not None and turns >= turn_cap
    return False
