"""The uniform record every trajectory format is loaded into: one event per tool call."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: how long a tool call's summary may get (the full command stays in the trajectory)
SUMMARY_CHARS = 300


@dataclass(frozen=True)
class ToolCallEvent:
    """One tool call, in the order the agent issued it."""

    turn: int  # the model call that issued it (1-based)
    index: int  # position among that call's tool calls (0-based)
    tool: str
    arguments: Mapping[str, Any]
    output: str  # the tool's output as the agent received it (the observation text)
    payload: str  # the tool's own output: the agent framework's wrapper removed

    @property
    def command(self) -> str | None:
        cmd = self.arguments.get("command")
        return cmd if isinstance(cmd, str) else None

    def summary(self, limit: int = SUMMARY_CHARS) -> str:
        """The command, or a short form of the arguments, on one line."""
        args = self.arguments
        if self.tool == "bash" and self.command is not None:
            text = " ".join(self.command.split())
        elif isinstance(args.get("command"), str) and isinstance(args.get("path"), str):
            text = f"{args['command']} {args['path']}"
            if args.get("view_range") is not None:
                text += f" {json.dumps(args['view_range'])}"
        else:
            text = json.dumps(dict(args), ensure_ascii=False, sort_keys=True, default=str)
        return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class Trajectory:
    """A run's tool calls and what the trajectory says about how it ended."""

    source: Path
    format: str  # mini-toolcall | mini-text | trae
    agent: str  # the agent it came from: mini | mini-text | trae
    events: tuple[ToolCallEvent, ...]
    turns: int  # model calls made
    exit_status: str  # the agent's own word (Submitted, LimitsExceeded, …; "" when unknown)
    turn_cap: int | None  # the step limit the trajectory records, when it records one
