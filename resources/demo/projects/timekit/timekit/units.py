"""Units of time: canonical names, aliases, and their length in seconds.

Every unit has one canonical short name (``"ns"``, ``"us"``, ``"ms"``, ``"s"``, ``"min"``,
``"h"``, ``"d"``, ``"w"``) and any number of aliases (``"msec"``, ``"minutes"``,
``"hrs"``, ...). Months and years are deliberately absent: their length depends on the
calendar, so a duration cannot be expressed in them without a reference date.
"""

from __future__ import annotations

import itertools

__all__ = [
    "DAY",
    "HOUR",
    "MINUTE",
    "SECOND",
    "UNIT_SECONDS",
    "WEEK",
    "UnknownUnitError",
    "canonical_unit",
    "convert",
    "split_seconds",
    "to_seconds",
    "unit_label",
    "unit_seconds",
]

SECOND = 1.0
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR
WEEK = 7 * DAY

#: canonical unit name -> its length in seconds, from the largest unit to the smallest
UNIT_SECONDS: dict[str, float] = {
    "w": WEEK,
    "d": DAY,
    "h": HOUR,
    "min": MINUTE,
    "s": SECOND,
    "ms": 1e-3,
    "us": 1e-6,
    "ns": 1e-9,
}

_ALIASES: dict[str, str] = {
    "nanosecond": "ns",
    "nanoseconds": "ns",
    "nsec": "ns",
    "µs": "us",  # micro sign
    "μs": "us",  # greek small letter mu
    "microsecond": "us",
    "microseconds": "us",
    "usec": "us",
    "millisecond": "ms",
    "milliseconds": "ms",
    "msec": "ms",
    "msecs": "ms",
    "sec": "s",
    "secs": "s",
    "second": "s",
    "seconds": "s",
    "m": "min",
    "mins": "min",
    "minute": "min",
    "minutes": "min",
    "hr": "h",
    "hrs": "h",
    "hour": "h",
    "hours": "h",
    "day": "d",
    "days": "d",
    "wk": "w",
    "wks": "w",
    "week": "w",
    "weeks": "w",
}

#: singular and plural words for each canonical unit, as used in sentences
_WORDS: dict[str, tuple[str, str]] = {
    "w": ("week", "weeks"),
    "d": ("day", "days"),
    "h": ("hour", "hours"),
    "min": ("minute", "minutes"),
    "s": ("second", "seconds"),
    "ms": ("millisecond", "milliseconds"),
    "us": ("microsecond", "microseconds"),
    "ns": ("nanosecond", "nanoseconds"),
}


class UnknownUnitError(ValueError):
    """A unit name that is neither a canonical name nor a known alias."""

    def __init__(self, name: str) -> None:
        super().__init__(f"unknown unit of time: {name!r}")
        self.name = name


def canonical_unit(name: str) -> str:
    """The canonical short name of a unit given by any of its names.

    Lookup ignores case and surrounding whitespace:

    >>> canonical_unit("Minutes")
    'min'
    >>> canonical_unit(" ms ")
    'ms'
    """
    key = name.strip().lower()
    if key in UNIT_SECONDS:
        return key
    try:
        return _ALIASES[key]
    except KeyError:
        raise UnknownUnitError(name) from None


def unit_seconds(name: str) -> float:
    """The length of one unit in seconds."""
    return UNIT_SECONDS[canonical_unit(name)]


def to_seconds(value: float, unit: str) -> float:
    """``value`` units expressed in seconds."""
    return value * unit_seconds(unit)


def convert(value: float, from_unit: str, to_unit: str) -> float:
    """Convert ``value`` from one unit to another.

    >>> convert(90, "min", "h")
    1.5
    """
    return value * unit_seconds(from_unit) / unit_seconds(to_unit)


def split_seconds(seconds: float, parts: tuple[str, ...] = ("d", "h", "min", "s")) -> list[tuple[str, float]]:
    """Break a non-negative number of seconds into whole counts of ``parts``.

    ``parts`` are unit names from the largest to the smallest; every part but the last
    gets a whole number, the last gets the remainder (which may have a fraction). Parts
    with a zero count are kept, so the result always has one entry per part.

    >>> split_seconds(5430)
    [('d', 0), ('h', 1), ('min', 30), ('s', 30.0)]
    """
    if seconds < 0:
        raise ValueError(f"cannot split a negative number of seconds: {seconds}")
    sizes = [(canonical_unit(p), unit_seconds(p)) for p in parts]
    if any(a[1] <= b[1] for a, b in itertools.pairwise(sizes)):
        raise ValueError(f"parts must go from the largest unit to the smallest: {parts}")
    out: list[tuple[str, float]] = []
    rest = seconds
    for unit, size in sizes[:-1]:
        count = int(rest // size)
        out.append((unit, count))
        rest -= count * size
    last_unit, last_size = sizes[-1]
    out.append((last_unit, rest / last_size))
    return out


def unit_label(unit: str, count: float) -> str:
    """``count`` and the unit's word, singular for exactly one: ``"1 hour"``, ``"2.5 hours"``."""
    singular, plural = _WORDS[canonical_unit(unit)]
    number = f"{count:g}" if isinstance(count, float) else str(count)
    return f"{number} {singular if count == 1 else plural}"
