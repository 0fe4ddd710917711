"""The conversation as the model reconstructs it on every call (the server keeps no state).

Each earlier turn is the model's own reply — its reasoning (possibly deleted) and its
actions (never deleted) — and what came back for each action (possibly deleted). Both
message styles are read: tool calls with ``tool`` results, and text actions with ``user``
observations — the model's own fenced blocks, in the fence it writes them
(:func:`fenced_actions`: ``mswea_bash_command`` for mini-swe-agent 2.x prompts, ``bash`` as
1.x asked). A call of a tool other than ``bash`` that the stand-in uses (Trae's editor, its
finishing tool) is read back as the action string the stand-in issued it as
(:func:`~forgetting.demo.scripted.commands.command_of`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from forgetting.demo.scripted.commands import Classified, Toolset, classify, command_of
from forgetting.demo.scripted.knowledge import TaskKnowledge
from forgetting.demo.scripted.observations import is_intact
from forgetting.prompt import messages as msgs
from forgetting.prompt.chat_format import content_text


@dataclass(frozen=True)
class Step:
    """One executed action and its output as currently visible."""

    turn: int  # the model call that issued it (1-based)
    command: str
    observation: str | None  # None when no output message answered it
    what: Classified
    plain: bool = False  # the agent returns plain tool results (Trae), not mini-swe-agent's wrapper

    @property
    def kind(self) -> str:
        return self.what.kind

    @property
    def intact(self) -> bool:
        """Whether the output visibly is whole (:func:`~.observations.is_intact`)."""
        return is_intact(self.observation, self.plain)


@dataclass(frozen=True)
class TurnView:
    index: int
    reasoning: str
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class Conversation:
    task_text: str  # the preamble's user messages (the task statement is never deleted)
    preamble_text: str  # every preamble message (system prompt and task)
    turns: tuple[TurnView, ...]

    @property
    def call_index(self) -> int:
        """The index of the call being answered (1-based)."""
        return len(self.turns) + 1

    @property
    def steps(self) -> list[Step]:
        return [s for t in self.turns for s in t.steps]


def task_text_of(messages: Sequence[Mapping[str, Any]]) -> str:
    seg = msgs.segment(messages)
    return "\n".join(content_text(messages[i]) for i in seg.preamble if messages[i].get("role") == "user")


def fenced_actions(fence: str) -> msgs.ActionSyntax:
    """How the stand-in reads back the text actions it wrote: its own ```` ```FENCE ```` blocks."""
    return msgs.ActionSyntax(rf"```{re.escape(fence)}\s*\n(.*?)\n```", f"the scripted stand-in's {fence} blocks")


def reconstruct(
    messages: Sequence[Mapping[str, Any]],
    task: TaskKnowledge | None,
    actions: msgs.ActionSyntax,
    tools: Toolset | None = None,
) -> Conversation:
    """The conversation of a request; ``actions``: the blocks the stand-in writes its text
    actions in (:func:`fenced_actions`); ``tools``: what the agent offers besides ``bash``."""
    tools = tools or Toolset()
    seg = msgs.segment(messages)
    preamble = [messages[i] for i in seg.preamble]
    turns = []
    for turn in seg.turns:
        assistant = messages[turn.assistant]
        observations = [messages[i] for i in turn.observations]
        by_id = {m.get("tool_call_id"): content_text(m) for m in observations if m.get("role") == "tool"}
        plain = [content_text(m) for m in observations if m.get("role") != "tool"]
        steps = []
        for k, action in enumerate(msgs.actions(assistant, actions)):
            command = command_of(action.tool, action.arguments, tools.root) or action.command or ""
            if action.call_id is not None and action.call_id in by_id:
                obs: str | None = by_id[action.call_id]
            elif action.call_id is None and k < len(plain):
                obs = plain[k]
            else:
                obs = None
            steps.append(Step(turn.index, command, obs, classify(command, task), tools.plain))
        turns.append(TurnView(turn.index, msgs.reasoning_text(assistant, actions), tuple(steps)))
    return Conversation(
        task_text="\n".join(content_text(m) for m in preamble if m.get("role") == "user"),
        preamble_text="\n".join(content_text(m) for m in preamble),
        turns=tuple(turns),
    )
