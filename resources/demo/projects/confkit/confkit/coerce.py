"""Typed values from configuration strings.

Values from files and the environment arrive as strings; values from mappings may already
be typed. Every function here accepts both: an ``int`` passes through :func:`to_int`
unchanged, the string ``"42"`` is parsed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

__all__ = [
    "KINDS",
    "CoercionError",
    "coerce",
    "to_bool",
    "to_float",
    "to_int",
    "to_list",
    "to_size",
]

TRUE_WORDS = frozenset({"1", "true", "yes", "on", "y", "t"})
FALSE_WORDS = frozenset({"0", "false", "no", "off", "n", "f", ""})

#: size suffixes: decimal (powers of 1000) and binary (powers of 1024), case-insensitive
_SIZE_FACTORS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "m": 1000**2,
    "mb": 1000**2,
    "g": 1000**3,
    "gb": 1000**3,
    "t": 1000**4,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]*)", re.IGNORECASE)


class CoercionError(ValueError):
    """A value that cannot be read as the requested kind."""

    def __init__(self, value: object, kind: str, hint: str = "") -> None:
        message = f"cannot read {value!r} as {kind}"
        super().__init__(f"{message} ({hint})" if hint else message)
        self.value = value
        self.kind = kind


def to_bool(value: object) -> bool:
    """``true/yes/on/1/y/t`` and ``false/no/off/0/n/f`` (any case, or empty for false)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
    raise CoercionError(value, "a boolean", "use true/false, yes/no, on/off or 1/0")


def to_int(value: object) -> int:
    """Decimal with optional ``_`` grouping, or ``0x``/``0o``/``0b`` prefixed."""
    if isinstance(value, bool):
        raise CoercionError(value, "an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip(), 0)
        except ValueError:
            pass
    raise CoercionError(value, "an integer")


def to_float(value: object) -> float:
    if isinstance(value, bool):
        raise CoercionError(value, "a number")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip().replace("_", ""))
        except ValueError:
            pass
    raise CoercionError(value, "a number")


def to_list(value: object, separator: str = ",") -> list[str]:
    """Items separated by ``separator``, stripped, empty items dropped; lists are copied.

    >>> to_list(" a, b,,c ")
    ['a', 'b', 'c']
    """
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    if isinstance(value, str):
        return [item.strip() for item in value.split(separator) if item.strip()]
    raise CoercionError(value, "a list")


def to_size(value: object) -> int:
    """A size in bytes: ``"512"``, ``"10kb"`` (10,000), ``"1.5GiB"``, ``"64 MiB"``.

    >>> to_size("2KiB")
    2048
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        match = _SIZE.fullmatch(value.strip())
        if match:
            number, suffix = match.groups()
            factor = _SIZE_FACTORS.get(suffix.lower())
            if factor is not None:
                size = float(number) * factor
                if size.is_integer():
                    return int(size)
                raise CoercionError(value, "a size", "not a whole number of bytes")
    raise CoercionError(value, "a size", "e.g. 512, 10MB or 64MiB")


#: the kinds :func:`coerce` knows by name
KINDS: dict[str, Callable[[Any], Any]] = {
    "str": str,
    "bool": to_bool,
    "int": to_int,
    "float": to_float,
    "list": to_list,
    "size": to_size,
}


def coerce(value: object, kind: str | type | Callable[[Any], Any]) -> Any:
    """``value`` as ``kind``: a name from :data:`KINDS`, a builtin type, or any callable."""
    if isinstance(kind, str):
        try:
            convert = KINDS[kind]
        except KeyError:
            raise ValueError(f"unknown kind {kind!r}; known: {', '.join(KINDS)}") from None
    elif kind in (bool, int, float, str, list):
        convert = KINDS[kind.__name__]  # type: ignore[union-attr]
    else:
        convert = kind
    return convert(value)
