"""Turns in an agent's message history (SPEC §2), for both message styles the agents use.

* ``tool_calls`` style (mini-swe-agent 2.x, Trae agent through Chat Completions): an
  ``assistant`` message with ``tool_calls`` and its ``tool`` messages.
* ``text`` style (mini-swe-agent text mode / 1.x): an ``assistant`` message whose text holds
  an action block, and the observation as the following ``user`` message. What an action
  block is belongs to the agent, not to this module: an :class:`ActionSyntax` holds the
  agent's own pattern (mini-swe-agent 2.x text mode: its model config's ``action_regex``,
  read by :func:`forgetting.agents.action_syntax`; 1.x: :data:`MINI_1X_ACTIONS`), and
  every function that tells reasoning from actions takes it. Under ``None`` — the
  tool-calling agents — a reply's text holds no action. A quoted ```` ```bash ```` snippet in
  mini-swe-agent 2.x reasoning is reasoning: that agent executes only its own block.

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
from typing import Any, Literal, NamedTuple

from forgetting.prompt.chat_format import content_text

Message = Mapping[str, Any]
Style = Literal["tool_calls", "text"]

#: roles that are part of a stored trajectory but never sent to the model
NON_PROMPT_ROLES = frozenset({"exit"})


@dataclass(frozen=True)
class ActionSyntax:
    """How an agent writes an action into the text of its reply: the agent's own regular
    expression, applied as the agent applies it (``re.DOTALL``, every match an action, the
    first group — else the whole match — the command, stripped); ``source`` says where it
    was read from."""

    regex: str
    source: str

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "_pattern", re.compile(self.regex, re.DOTALL))
        except re.error as exc:
            raise ValueError(f"{self.source}: action regex {self.regex!r} does not compile ({exc})") from None

    @property
    def pattern(self) -> re.Pattern[str]:
        return self._pattern  # type: ignore[attr-defined, no-any-return]

    def commands(self, text: str) -> list[str]:
        group = 1 if self.pattern.groups else 0
        return [m.group(group).strip() for m in self.pattern.finditer(text)]

    def to_json(self) -> dict[str, str]:
        return {"regex": self.regex, "source": self.source}


#: mini-swe-agent 1.x's action pattern (the default ``action_regex`` of its ``AgentConfig``;
#: 1.x is not installed here): for trajectories written by 1.x that do not record their own
MINI_1X_ACTIONS = ActionSyntax(r"```bash\s*\n(.*?)\n```", "mini-swe-agent 1.x AgentConfig.action_regex default")


class Turn(NamedTuple):
    """One turn of a history (a named tuple: a long history makes hundreds at every call)."""

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


def segment(
    messages: Sequence[Message], style: Style | None = None, *, head: tuple[Segmented, int] | None = None
) -> Segmented:
    """Split a history into preamble and turns. ``head``: the segmentation of the history's first
    ``n`` messages (given as ``(segmented, n)``): only the messages after them are looked at."""
    style = style or detect_style(messages)
    preamble: list[int] = []
    turns: list[Turn] = []
    current: int | None = None
    obs: list[int] = []
    start = 0
    if head is not None:
        known, start = head
        if known.turns:  # its last turn may gain tool outputs: it is reopened
            turns, last = list(known.turns[:-1]), known.turns[-1]
            current, obs = last.assistant, list(last.observations)
        preamble = list(known.preamble)
    for i in range(start, len(messages)):
        m = messages[i]
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


def split_text_actions(content: str, syntax: ActionSyntax | None) -> list[tuple[str, str]]:
    """``content`` as ordered spans ``("text", …)`` / ``("action", …)``; joining them gives it
    back. The actions are the matches of the agent's ``syntax``; under ``None`` there are none."""
    if syntax is None:
        return [("text", content)] if content else []
    spans: list[tuple[str, str]] = []
    pos = 0
    for m in syntax.pattern.finditer(content):
        if m.start() > pos:
            spans.append(("text", content[pos : m.start()]))
        spans.append(("action", m.group(0)))
        pos = m.end()
    if pos < len(content):
        spans.append(("text", content[pos:]))
    return spans


def reasoning_text(message: Message, syntax: ActionSyntax | None) -> str:
    """The free-text reasoning of an assistant message (its text outside the agent's action
    blocks — all of it when the message has tool calls —, preceded by ``reasoning_content``
    when present)."""
    text = content_text(message)
    if not message.get("tool_calls"):
        text = "".join(t for kind, t in split_text_actions(text, syntax) if kind == "text")
    rc = message.get("reasoning_content")
    return f"{rc}\n{text}" if rc else text


def _parse_arguments(raw: Any) -> Mapping[str, Any]:
    if isinstance(raw, Mapping):
        return raw
    try:
        value = json.loads(raw) if raw else {}
    except (TypeError, ValueError, RecursionError):
        return {"_raw": str(raw)}
    return value if isinstance(value, Mapping) else {"_raw": str(raw)}


def actions(message: Message, syntax: ActionSyntax | None) -> list[Action]:
    """The tool calls of an assistant message: its ``tool_calls``, else the commands of the
    agent's action blocks in its text (none under ``syntax`` None)."""
    calls = message.get("tool_calls") or []
    if calls:
        out = []
        for c in calls:
            fn = c.get("function") or {}
            out.append(Action(str(fn.get("name", "")), _parse_arguments(fn.get("arguments")), c.get("id")))
        return out
    if syntax is None:
        return []
    return [Action("bash", {"command": c}) for c in syntax.commands(content_text(message))]


def observation_text(message: Message) -> str:
    return content_text(message)
