"""The deletable text of a message: its *cores*, and how to put rewritten cores back.

What each part of a turn (:mod:`forgetting.prompt.messages`) holds:

``reasoning``
    the assistant message's ``reasoning_content`` (when present) and the text of its
    ``content``. When the message has ``tool_calls``, those are its actions (never touched)
    and the whole content is reasoning; when it has none (the text-action style), the
    agent's action blocks — the matches of its :class:`~forgetting.prompt.messages.ActionSyntax`,
    e.g. mini-swe-agent 2.x's ```` ```mswea_bash_command ```` block — are cut out of the
    content first and stay byte-identical in place. Any other fenced block (a quoted
    ```` ```bash ```` snippet the agent never runs) is reasoning. Under syntax ``None`` (a
    tool-calling agent) the whole content is reasoning. The rule looks at the message alone,
    never at the rest of the history, so a message is always split the same way in every call.
``tool_output``
    the content of every observation message of the turn (``tool`` results, ``user``
    observations, format-error messages).

Each text is split into leading whitespace, a *core* and trailing whitespace; only cores
are deleted, so the whitespace that separates reasoning from an action block survives and
the block stays on its own line. A whitespace-only text has no core: nothing to delete.
Content given as a list of OpenAI content parts is handled part by part (non-text parts
are kept); every other key of the message (role, ``tool_call_id``, ``tool_calls``,
``name``, …) is copied unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from forgetting.prompt.messages import ActionSyntax, split_text_actions

#: one slot of a message: ("reasoning_content",), ("content",) or ("content", i) for list part i
Path = tuple[Any, ...]
#: the items of one slot: literal text kept as is, or the index of a core
Item = str | int


@dataclass(frozen=True)
class Editable:
    """A message split into deletable cores and the literal text around them."""

    cores: tuple[str, ...]
    layout: tuple[tuple[Path, tuple[Item, ...]], ...]

    def fields(self, new_cores: Sequence[str]) -> tuple[tuple[Path, str], ...]:
        """Each slot's new text once ``new_cores`` replace the cores."""
        out = []
        for path, items in self.layout:
            out.append((path, "".join(new_cores[i] if isinstance(i, int) else i for i in items)))
        return tuple(out)

    def rebuild(self, message: Mapping[str, Any], new_cores: Sequence[str]) -> dict[str, Any]:
        """A new message: ``message`` with its cores replaced by ``new_cores``."""
        return apply_fields(message, self.fields(new_cores))


def apply_fields(message: Mapping[str, Any], fields: Sequence[tuple[Path, str]]) -> dict[str, Any]:
    """A copy of ``message`` with the given slots set (content-part lists copied, not shared)."""
    out = dict(message)
    content_list: list[Any] | None = None
    for path, text in fields:
        if len(path) == 1:
            out[path[0]] = text
        else:
            if content_list is None:
                content_list = list(out["content"])
                out["content"] = content_list
            content_list[path[1]] = {**content_list[path[1]], "text": text}
    return out


def _split_ws(text: str, items: list[Item], cores: list[str]) -> None:
    core = text.strip()
    if not core:
        items.append(text)
        return
    lead = text[: len(text) - len(text.lstrip())]
    trail = text[len(lead) + len(core) :]
    if lead:
        items.append(lead)
    items.append(len(cores))
    cores.append(core)
    if trail:
        items.append(trail)


def _slot_items(text: str, syntax: ActionSyntax | None, cores: list[str]) -> tuple[Item, ...]:
    items: list[Item] = []
    if syntax is not None:
        for kind, span in split_text_actions(text, syntax):
            if kind == "action":
                items.append(span)
            else:
                _split_ws(span, items, cores)
    else:
        _split_ws(text, items, cores)
    return tuple(items)


def text_slots(message: Mapping[str, Any], reasoning: bool) -> list[tuple[Path, str]]:
    slots: list[tuple[Path, str]] = []
    if reasoning and isinstance(message.get("reasoning_content"), str):
        slots.append((("reasoning_content",), message["reasoning_content"]))
    content = message.get("content")
    if isinstance(content, str):
        slots.append((("content",), content))
    elif isinstance(content, list):
        for i, part in enumerate(content):
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                slots.append((("content", i), part["text"]))
    return slots


def decompose(message: Mapping[str, Any], part: str, syntax: ActionSyntax | None) -> Editable | None:
    """The cores of ``message`` for ``part``, the agent's action blocks (``syntax``) kept out;
    None when it has nothing to delete."""
    reasoning = part == "reasoning"
    text_actions = syntax if reasoning and not message.get("tool_calls") else None
    cores: list[str] = []
    layout = []
    for path, text in text_slots(message, reasoning):
        items = _slot_items(text, text_actions if path[0] == "content" else None, cores)
        layout.append((path, items))
    if not cores:
        return None
    return Editable(tuple(cores), tuple(layout))
