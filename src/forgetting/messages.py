"""Turns in an agent's message history (SPEC §2), for both message styles the agents use.

* ``tool_calls`` style (mini-swe-agent 2.x, Trae agent through Chat Completions): an
  ``assistant`` message with ``tool_calls`` and its ``tool`` messages.
* ``text`` style (mini-swe-agent text mode / 1.x): an ``assistant`` message whose text holds
  a fenced action block (```` ```mswea_bash_command ```` or ```` ```bash ````), and the
  observation as the following ``user`` message.

A *turn* is one model call and what it produced: the assistant message (its free-text
**reasoning** — the text outside action blocks, plus ``reasoning_content`` when present —
and its **actions**) and the **tool output** messages that came back (every non-assistant
message up to the next assistant message: tool results, observations, format errors). The
*preamble* — every message before the first assistant message, i.e. the system prompt and
the task statement — is never part of a turn.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from forgetting.chat_format import content_text

Message = Mapping[str, Any]
Style = Literal["tool_calls", "text"]

#: fenced action blocks of mini-swe-agent 2.x text mode and of 1.x / SWE-agent
ACTION_BLOCK = re.compile(r"```(?:mswea_bash_command|bash|sh)[ \t]*\n.*?\n```", re.DOTALL)
_ACTION_BODY = re.compile(r"```(?:mswea_bash_command|bash|sh)[ \t]*\n(.*?)\n```", re.DOTALL)
#: roles that are part of a stored trajectory but never sent to the model
NON_PROMPT_ROLES = frozenset({"exit"})


@dataclass(frozen=True)
class Turn:
    index: int  # 1-based: the model call that produced this turn
    assistant: int  # message index of the assistant message
    observations: tuple[int, ...]  # message indices of its tool outputs


@dataclass(frozen=True)
class Segmented:
    style: Style
    preamble: tuple[int, ...]
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Action:
    """One tool call: the tool's name and its arguments (``{"command": …}`` for bash)."""

    tool: str
    arguments: Mapping[str, Any]
    call_id: str | None = None

    @property
    def command(self) -> str | None:
        cmd = self.arguments.get("command")
        return cmd if isinstance(cmd, str) else None


def detect_style(messages: Sequence[Message]) -> Style:
    for m in messages:
        if m.get("role") == "tool" or (m.get("role") == "assistant" and m.get("tool_calls")):
            return "tool_calls"
    return "text"


def prompt_messages(messages: Sequence[Message]) -> list[Message]:
    """The messages of a stored trajectory that the model saw (``exit`` records dropped)."""
    return [m for m in messages if m.get("role") not in NON_PROMPT_ROLES]


def segment(messages: Sequence[Message], style: Style | None = None) -> Segmented:
    """Split a history into preamble and turns."""
    style = style or detect_style(messages)
    preamble: list[int] = []
    turns: list[Turn] = []
    current: int | None = None
    obs: list[int] = []
    for i, m in enumerate(messages):
        role = m.get("role")
        if role in NON_PROMPT_ROLES:
            continue
        if role == "assistant":
            if current is not None:
                turns.append(Turn(len(turns) + 1, current, tuple(obs)))
            current, obs = i, []
        elif current is None:
            preamble.append(i)
        else:
            obs.append(i)
    if current is not None:
        turns.append(Turn(len(turns) + 1, current, tuple(obs)))
    return Segmented(style, tuple(preamble), tuple(turns))


def split_text_actions(content: str) -> list[tuple[str, str]]:
    """``content`` as ordered spans ``("text", …)`` / ``("action", …)``; joining them gives it back."""
    spans: list[tuple[str, str]] = []
    pos = 0
    for m in ACTION_BLOCK.finditer(content):
        if m.start() > pos:
            spans.append(("text", content[pos : m.start()]))
        spans.append(("action", m.group(0)))
        pos = m.end()
    if pos < len(content):
        spans.append(("text", content[pos:]))
    return spans


def reasoning_text(message: Message) -> str:
    """The free-text reasoning of an assistant message (text outside action blocks,
    preceded by ``reasoning_content`` when present)."""
    text = "".join(t for kind, t in split_text_actions(content_text(message)) if kind == "text")
    rc = message.get("reasoning_content")
    return f"{rc}\n{text}" if rc else text


def _parse_arguments(raw: Any) -> Mapping[str, Any]:
    if isinstance(raw, Mapping):
        return raw
    try:
        value = json.loads(raw) if raw else {}
    except (TypeError, ValueError):
        return {"_raw": str(raw)}
    return value if isinstance(value, Mapping) else {"_raw": str(raw)}


def actions(message: Message) -> list[Action]:
    """The tool calls of an assistant message, in either style."""
    calls = message.get("tool_calls") or []
    if calls:
        out = []
        for c in calls:
            fn = c.get("function") or {}
            out.append(Action(str(fn.get("name", "")), _parse_arguments(fn.get("arguments")), c.get("id")))
        return out
    return [Action("bash", {"command": body.strip()}) for body in _ACTION_BODY.findall(content_text(message))]


def observation_text(message: Message) -> str:
    return content_text(message)
