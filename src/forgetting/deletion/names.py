"""The words configuration names are made of (the naming scheme in ``config/README.md``).

A name is lower-case words joined by ``-``. Its first word says which policy it is:

==============================  =====================================================
``{retention}-{selection}``     ``random`` (the paper's 42 and other delays/amounts)
``batch{k}-{retention}-{sel}``  ``batch``: rewritten every ``k`` calls
``gate[{H}]-{retention}-{sel}`` ``gate``: rewritten when the saving pays for the re-billing
``reuse{N}-{retention}``        ``reuse``: tool outputs of files untouched for ``N`` turns
``mask{M}``                     ``mask``: observation masking, last ``M`` turns verbatim
==============================  =====================================================

``{retention}`` is ``delayed`` (``keep_last`` 2), ``immediate`` (0) or ``keep{K}`` (any
other ``K``); ``{selection}`` is ``{granularity}-{scope}-{amount}`` as in the paper's names.
This module holds the shared pieces; each policy module writes and reads its own names.
"""

from __future__ import annotations

import re

from forgetting.foundation.errors import ConfigError
from forgetting.grid import GRANULARITIES, SCOPES, TIMINGS

_KEEP = re.compile(r"^keep(\d+)$")


def amount_text(amount: float | int) -> str:
    """``100`` for 100.0, ``12.5`` for 12.5 (as the paper's names write amounts)."""
    a = float(amount)
    return str(int(a)) if a.is_integer() else repr(a)


def retention_word(keep_last: int) -> str:
    """``delayed``, ``immediate`` or ``keep{K}``."""
    for timing, k in TIMINGS.items():
        if k == keep_last:
            return timing
    return f"keep{keep_last}"


def timing_of(keep_last: int) -> str | None:
    """The paper's timing with this retention delay, None for any other delay."""
    return next((t for t, k in TIMINGS.items() if k == keep_last), None)


def parse_retention(word: str, name: str, key: str) -> int | None:
    """``keep_last`` of a retention word; None when ``word`` is not one."""
    if word in TIMINGS:
        return TIMINGS[word]
    m = _KEEP.match(word)
    if m is None:
        return None
    k = int(m.group(1))
    timing = timing_of(k)
    if timing is not None:
        raise ConfigError(f"{key}: {name!r}: write {word!r} as {timing!r} (keep_last {k})")
    return k


def numbered(word: str, prefix: str, *, optional: bool = False) -> int | bool | None:
    """The number after ``prefix`` in ``word`` (``batch4`` → 4); False when ``word`` is not
    ``prefix`` followed by digits; None for a bare ``prefix`` when the number is optional."""
    if not word.startswith(prefix):
        return False
    rest = word[len(prefix) :]
    if not rest:
        return None if optional else False
    return int(rest) if rest.isdigit() else False


def split_numbered(name: str, prefix: str, *, optional: bool = False) -> tuple[int | None, list[str]] | None:
    """A name whose first word is ``prefix`` and a number (:func:`numbered`): that number and
    the words after it; None when the name is not of that prefix."""
    first, *rest = name.split("-")
    n = numbered(first, prefix, optional=optional)
    return None if n is False else (n, rest)  # type: ignore[return-value]


def selection_words(granularity: str | None, scope: str | None, amount: float | None) -> str:
    return f"{granularity}-{scope}-{amount_text(amount or 0)}"


def parse_selection(words: list[str], name: str, key: str) -> dict[str, object]:
    """``granularity``, ``scope`` and ``amount`` from the three selection words of ``name``."""
    if len(words) != 3:
        raise ConfigError(f"{key}: {name!r}: expected {{granularity}}-{{scope}}-{{amount}} after the policy word")
    granularity, scope, amount_s = words
    if granularity not in GRANULARITIES:
        raise ConfigError(
            f"{key}: unknown granularity {granularity!r} in {name!r}; allowed values: {', '.join(GRANULARITIES)}"
        )
    if scope not in SCOPES:
        raise ConfigError(f"{key}: unknown scope {scope!r} in {name!r}; allowed values: {', '.join(SCOPES)}")
    try:
        amount = float(amount_s)
    except ValueError:
        raise ConfigError(f"{key}: amount {amount_s!r} in {name!r} is not a number; allowed: (0, 100]") from None
    out: dict[str, object] = {"granularity": granularity, "scope": scope}
    out["amount"] = int(amount) if amount.is_integer() else amount
    return out
