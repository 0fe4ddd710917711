"""Durations and moments in words: ``"3 minutes"``, ``"in 2 hours"``, ``"5 days ago"``.

:func:`naturaldelta` names a duration with one unit, rounded; :func:`precisedelta` spells
out every unit down to a chosen one; :func:`naturaltime` describes a moment relative to
now (or to a given reference moment).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from timekit import units
from timekit.durations import Duration, parse_duration

__all__ = ["naturaldelta", "naturaltime", "precisedelta"]

#: (unit, upper bound in seconds), from the smallest unit to the largest
_SCALE: tuple[tuple[str, float], ...] = (
    ("s", units.MINUTE),
    ("min", units.HOUR),
    ("h", units.DAY),
    ("d", units.WEEK),
    ("w", float("inf")),
)

#: below this many seconds a duration is "a moment"
MOMENT = 1.0


def naturaldelta(value: Duration | float | str | timedelta) -> str:
    """A duration in one rounded unit, ignoring its sign.

    >>> naturaldelta(95)
    '2 minutes'
    >>> naturaldelta("36h")
    '2 days'
    """
    seconds = abs(parse_duration(value).seconds)
    if seconds < MOMENT:
        return "a moment"
    for unit, bound in _SCALE:
        size = units.unit_seconds(unit)
        count = round(seconds / size)
        if count * size < bound:
            return units.unit_label(unit, count)
    raise AssertionError("the last bound is infinite")  # pragma: no cover


def precisedelta(value: Duration | float | str | timedelta, *, smallest: str = "s") -> str:
    """Every non-zero unit from weeks down to ``smallest``, joined in English.

    The smallest unit is rounded to a whole number.

    >>> precisedelta(3725)
    '1 hour, 2 minutes and 5 seconds'
    >>> precisedelta("1d 3h 20m", smallest="h")
    '1 day and 3 hours'
    """
    seconds = abs(parse_duration(value).seconds)
    order = ["w", "d", "h", "min", "s"]
    stop = order.index(units.canonical_unit(smallest))
    parts = order[: stop + 1]
    size = units.unit_seconds(parts[-1])
    seconds = round(seconds / size) * size
    counts = units.split_seconds(seconds, tuple(parts))
    words = [units.unit_label(unit, round(count)) for unit, count in counts if round(count)]
    if not words:
        return units.unit_label(parts[-1], 0)
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " and " + words[-1]


def naturaltime(moment: datetime, *, now: datetime | None = None) -> str:
    """``moment`` relative to ``now``: ``"3 minutes ago"``, ``"in 2 days"``, ``"just now"``.

    Both datetimes must be naive or both aware; ``now`` defaults to the current time in
    the moment's time zone (UTC for aware moments).
    """
    if now is None:
        now = datetime.now(timezone.utc) if moment.tzinfo is not None else datetime.now()
    if (moment.tzinfo is None) != (now.tzinfo is None):
        raise ValueError("cannot compare a naive and an aware datetime")
    delta: timedelta = now - moment
    seconds = delta.total_seconds()
    if abs(seconds) < MOMENT:
        return "just now"
    words = naturaldelta(abs(seconds))
    return f"{words} ago" if seconds > 0 else f"in {words}"
