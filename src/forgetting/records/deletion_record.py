"""One rewritten part of one message: the record the deletion engine makes, the proxy writes
into the call log and every reader (cost, behaviour) parses back — the one definition of it.

A call record's ``deleted`` list holds one :class:`PartDeletion` per message part rewritten
for the first time at that call (a rewritten part stays rewritten in every later call). Its
JSON object has exactly these fields (call-log format ``forgetting-calllog/1``; the field set
is the one the engine has written since that format began, so every call log on disk reads
through :meth:`PartDeletion.from_json`):

``turn``           the turn (1-based, :func:`forgetting.prompt.messages.segment`)
``part``           ``reasoning`` or ``tool_output``
``message_index``  the message of the history that was rewritten
``mode``           ``turn`` (replaced by a placeholder) or ``token`` (a share of its tokens removed)
``tokens_before``  tokens of the part's deletable text in that message before the rewrite
``tokens_after``   tokens of the text sent instead: the placeholder, or the kept tokens re-encoded
``tokens_removed`` tokens of the original that are no longer sent: all of them at turn level,
                   those the draw removed at token level

*Removed* is the original text that left the prompt, never the net change of its length: a
placeholder longer than the part it replaces (a tool output ``0``, reasoning ``Let me
check.``) makes the prompt longer — ``tokens_after > tokens_before`` — and still removes
``tokens_before`` tokens. The cost split (cached, new, re-billed) is computed from the prompts
as sent, so a longer placeholder shows there as it is; nothing is derived from
``tokens_before − tokens_after``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from forgetting.foundation.errors import RunOutputError
from forgetting.grid import PARTS

#: how a part is rewritten: replaced by a placeholder, or thinned token by token
MODES: tuple[str, ...] = ("turn", "token")


@dataclass(frozen=True)
class PartDeletion:
    turn: int
    part: str
    message_index: int
    mode: str
    tokens_before: int
    tokens_after: int
    tokens_removed: int

    def __post_init__(self) -> None:
        problem = _problem(self)
        if problem is not None:
            raise ValueError(f"deletion record {self}: {problem}")

    @property
    def identity(self) -> tuple[int, str, int]:
        """What was rewritten: (turn, part, message index)."""
        return (self.turn, self.part, self.message_index)

    def to_json(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in FIELDS}

    @classmethod
    def from_json(cls, obj: Any, where: str) -> PartDeletion:
        """Parse one ``deleted`` entry of a call log; ``where`` names it in the error."""
        if not isinstance(obj, Mapping):
            raise RunOutputError(f"{where}: a deleted record is not a JSON object: {obj!r}")
        missing = [f for f in FIELDS if f not in obj]
        unknown = sorted(k for k in obj if k not in FIELDS)
        if missing or unknown:
            what = f"lacks {', '.join(missing)}" if missing else f"has unknown field {', '.join(unknown)}"
            raise RunOutputError(f"{where}: a deleted record {what} (expected {', '.join(FIELDS)}): {dict(obj)!r}")
        for f in FIELDS:
            value, want = obj[f], _TYPES[f]
            if isinstance(value, bool) or not isinstance(value, want):
                raise RunOutputError(f"{where}: a deleted record's {f} is not {want.__name__}: {dict(obj)!r}")
        try:
            return cls(**{f: obj[f] for f in FIELDS})
        except ValueError as exc:
            raise RunOutputError(f"{where}: {exc}") from None


FIELDS: tuple[str, ...] = tuple(f.name for f in fields(PartDeletion))
_TYPES: dict[str, type] = {f: (str if f in ("part", "mode") else int) for f in FIELDS}


def _problem(d: PartDeletion) -> str | None:
    if d.part not in PARTS:
        return f"part {d.part!r} is not one of {', '.join(PARTS)}"
    if d.mode not in MODES:
        return f"mode {d.mode!r} is not one of {', '.join(MODES)}"
    if d.turn < 1 or d.message_index < 0:
        return "turn must be at least 1 and message_index at least 0"
    if min(d.tokens_before, d.tokens_after, d.tokens_removed) < 0:
        return "a token count is negative"
    if d.tokens_removed > d.tokens_before:
        return "removes more tokens than the part had"
    if d.mode == "turn" and d.tokens_removed != d.tokens_before:
        return "a turn-level rewrite removes every token of the part"
    return None
