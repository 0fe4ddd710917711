"""Counts in words a reader sees: ``1 agent``, ``2 agents`` — never ``1 agents``."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, the noun plural (``plural``, else ``noun + "s"``) unless ``n`` is 1."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"
