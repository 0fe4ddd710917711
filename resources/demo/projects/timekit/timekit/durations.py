"""Durations: the :class:`Duration` type, parsing, and formatting.

:func:`parse_duration` accepts three notations:

* **compact**: ``"1h30m"``, ``"2d 4h"``, ``"250ms"``, ``"1.5h"`` -- number/unit pairs,
  with any unit name :func:`timekit.units.canonical_unit` understands; each unit at most
  once;
* **clock**: ``"1:30:00"``, ``"05:07"``, ``"0:00:01.250"`` -- ``[[H:]M:]S``, where the
  seconds may have a fraction and every field but the first is below 60;
* **ISO 8601**: ``"PT1H30M"``, ``"P2DT3H"``, ``"P1W"`` -- the duration form of the
  standard without years and months, whose length depends on the calendar.

A bare number is a count of seconds. A leading ``-`` negates the whole duration, so
``"-1h30m"`` is minus ninety minutes.

The formatters write the same notations back: :func:`format_duration` (compact),
:func:`format_clock` and :func:`format_iso`. For every duration ``d`` with a whole number
of milliseconds, ``parse_duration(format_X(d, ...)) == d`` in each notation.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta

from timekit import units

__all__ = [
    "Duration",
    "DurationError",
    "format_clock",
    "format_duration",
    "format_iso",
    "parse_duration",
    "sum_durations",
]


class DurationError(ValueError):
    """A value that is not a duration in any accepted notation."""


_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"
_COMPACT_PART = re.compile(rf"\s*({_NUMBER})\s*([^\d\s.]+)\s*")
_CLOCK = re.compile(r"\d+(?::\d{1,2}){1,2}(?:\.\d+)?")
_ISO_NUMBER = r"(\d+(?:[.,]\d+)?)"
_ISO = re.compile(
    rf"P(?:{_ISO_NUMBER}W)?(?:{_ISO_NUMBER}D)?"
    rf"(?:T(?:{_ISO_NUMBER}H)?(?:{_ISO_NUMBER}M)?(?:{_ISO_NUMBER}S)?)?",
    re.IGNORECASE,
)
_ISO_SIZES = (units.WEEK, units.DAY, units.HOUR, units.MINUTE, units.SECOND)


@dataclass(frozen=True, order=True)
class Duration:
    """A length of time, held as a float number of seconds (negative allowed).

    Durations add, subtract, scale by numbers and divide (by a number, giving a duration,
    or by another duration, giving their ratio). ``str()`` gives the compact notation.

    >>> Duration(5400).hours
    1.5
    >>> str(Duration.of(90, "min"))
    '1h30m'
    """

    seconds: float

    def __post_init__(self) -> None:
        if not isinstance(self.seconds, (int, float)) or isinstance(self.seconds, bool):
            raise TypeError(f"Duration needs a number of seconds, not {type(self.seconds).__name__}")
        if not math.isfinite(self.seconds):
            raise DurationError(f"not a finite duration: {self.seconds!r}")
        object.__setattr__(self, "seconds", float(self.seconds))

    @classmethod
    def of(cls, value: float, unit: str = "s") -> Duration:
        """``value`` of ``unit``: ``Duration.of(3, "h")``."""
        return cls(units.to_seconds(value, unit))

    @classmethod
    def from_timedelta(cls, delta: timedelta) -> Duration:
        """The length of a :class:`datetime.timedelta`, to the microsecond."""
        return cls(delta.days * units.DAY + delta.seconds + delta.microseconds / 1_000_000)

    def to_timedelta(self) -> timedelta:
        """The duration as a :class:`datetime.timedelta` (rounded to microseconds)."""
        return timedelta(seconds=self.seconds)

    def to(self, unit: str) -> float:
        """The duration as a number of ``unit``: ``Duration(90).to("min") == 1.5``."""
        return units.convert(self.seconds, "s", unit)

    @property
    def milliseconds(self) -> float:
        return self.to("ms")

    @property
    def minutes(self) -> float:
        return self.to("min")

    @property
    def hours(self) -> float:
        return self.to("h")

    @property
    def days(self) -> float:
        return self.to("d")

    def __add__(self, other: object) -> Duration:
        if isinstance(other, Duration):
            return Duration(self.seconds + other.seconds)
        return NotImplemented

    def __sub__(self, other: object) -> Duration:
        if isinstance(other, Duration):
            return Duration(self.seconds - other.seconds)
        return NotImplemented

    def __mul__(self, factor: object) -> Duration:
        if isinstance(factor, (int, float)) and not isinstance(factor, bool):
            return Duration(self.seconds * factor)
        return NotImplemented

    __rmul__ = __mul__

    def __truediv__(self, other: object) -> Duration | float:
        if isinstance(other, Duration):
            if other.seconds == 0:
                raise ZeroDivisionError("division by a zero duration")
            return self.seconds / other.seconds
        if isinstance(other, (int, float)) and not isinstance(other, bool):
            return Duration(self.seconds / other)
        return NotImplemented

    def __neg__(self) -> Duration:
        return Duration(-self.seconds)

    def __abs__(self) -> Duration:
        return Duration(abs(self.seconds))

    def __bool__(self) -> bool:
        return self.seconds != 0

    def __str__(self) -> str:
        return format_duration(self, precision=3)


# --------------------------------------------------------------------------- parsing


def parse_duration(value: str | float | Duration | timedelta) -> Duration:
    """A :class:`Duration` from any accepted notation (see the module docstring).

    Numbers are seconds; durations and timedeltas are converted. Raises
    :class:`DurationError` for anything else.

    >>> parse_duration("1h30m").seconds
    5400.0
    >>> parse_duration("-0:01:30").seconds
    -90.0
    """
    if isinstance(value, Duration):
        return value
    if isinstance(value, timedelta):
        return Duration.from_timedelta(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Duration(value)
    if not isinstance(value, str):
        raise DurationError(f"not a duration: {value!r}")
    text = value.strip()
    sign = 1.0
    if text[:1] in ("-", "+"):
        sign = -1.0 if text[0] == "-" else 1.0
        text = text[1:].lstrip()
    if not text:
        raise DurationError(f"not a duration: {value!r}")
    try:
        seconds = _parse_unsigned(text)
    except DurationError as exc:
        raise DurationError(f"not a duration: {value!r} ({exc})") from None
    return Duration(sign * seconds)


def _parse_unsigned(text: str) -> float:
    if re.fullmatch(_NUMBER, text):
        return float(text)
    if text[0] in "pP":
        return _parse_iso(text)
    if ":" in text:
        return _parse_clock(text)
    return _parse_compact(text)


def _parse_compact(text: str) -> float:
    """``1h30m``, ``2d 4h``: number/unit pairs, each unit at most once."""
    total = 0.0
    seen: set[str] = set()
    pos = 0
    while pos < len(text):
        match = _COMPACT_PART.match(text, pos)
        if match is None:
            raise DurationError(f"unexpected text at {text[pos:]!r}")
        number, name = match.groups()
        try:
            unit = units.canonical_unit(name)
        except units.UnknownUnitError as exc:
            raise DurationError(str(exc)) from None
        if unit in seen:
            raise DurationError(f"unit {unit!r} given twice")
        seen.add(unit)
        total += units.to_seconds(float(number), unit)
        pos = match.end()
    return total


def _parse_clock(text: str) -> float:
    """``[[H:]M:]S[.fff]``; fields after the first must be below 60."""
    if not _CLOCK.fullmatch(text):
        raise DurationError("clock notation is [[H:]M:]S with two-digit fields")
    fields = text.split(":")
    seconds = float(fields[-1])
    minutes = int(fields[-2])
    hours = int(fields[-3]) if len(fields) >= 3 else 0
    if seconds >= 60:
        raise DurationError(f"seconds field {fields[-1]!r} is 60 or more")
    if len(fields) >= 3 and minutes >= 60:
        raise DurationError(f"minutes field {fields[-2]!r} is 60 or more")
    return hours * units.HOUR + minutes * units.MINUTE + seconds


def _parse_iso(text: str) -> float:
    """``PnWnDTnHnMnS``, each part optional; a fraction only on the smallest part."""
    match = _ISO.fullmatch(text)
    if match is None or not any(match.groups()) or text.upper().endswith("T"):
        raise DurationError("ISO 8601 durations look like P2DT3H30M (no years or months)")
    present = [i for i, g in enumerate(match.groups()) if g]
    total = 0.0
    for index, (group, size) in enumerate(zip(match.groups(), _ISO_SIZES, strict=True)):
        if not group:
            continue
        number = group.replace(",", ".")
        if "." in number and index != present[-1]:
            raise DurationError("only the smallest part of an ISO duration may have a fraction")
        total += float(number) * size
    return total


def sum_durations(values: Iterable[str | float | Duration | timedelta]) -> Duration:
    """The total of several durations in any accepted notations."""
    return Duration(math.fsum(parse_duration(v).seconds for v in values))


# --------------------------------------------------------------------------- formatting


def _rounded(value: Duration | float, precision: int) -> tuple[str, float]:
    """The sign and the magnitude rounded to ``precision`` decimals of a second."""
    seconds = value.seconds if isinstance(value, Duration) else float(value)
    magnitude = round(abs(seconds), precision)
    return ("-" if seconds < 0 and magnitude > 0 else ""), magnitude


def _number(value: float, precision: int) -> str:
    """``value`` with at most ``precision`` decimals and no trailing zeros."""
    text = f"{value:.{precision}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def format_duration(
    value: Duration | float,
    *,
    precision: int = 0,
    largest: str = "d",
) -> str:
    """The compact notation: ``"1h30m"``, ``"2d4h"``, ``"45.5s"``, ``"0s"``.

    ``precision`` is the number of decimals kept on the seconds; ``largest`` the largest
    unit used (``largest="h"`` writes two days as ``"48h"``). Zero parts are left out.

    >>> format_duration(5400)
    '1h30m'
    >>> format_duration(Duration(90061), largest="h")
    '25h1m1s'
    """
    sign, magnitude = _rounded(value, precision)
    order = ["w", "d", "h", "min", "s"]
    start = order.index(units.canonical_unit(largest))
    parts = units.split_seconds(magnitude, tuple(order[start:]))
    pieces = []
    for unit, count in parts[:-1]:
        if count:
            pieces.append(f"{int(count)}{'m' if unit == 'min' else unit}")
    seconds = _number(parts[-1][1], precision)
    if seconds != "0" or not pieces:
        pieces.append(f"{seconds}s")
    return sign + "".join(pieces)


def format_clock(value: Duration | float, *, precision: int = 0) -> str:
    """The clock notation ``H:MM:SS`` (hours may exceed 24): ``"1:30:00"``, ``"27:00:05.5"``.

    >>> format_clock(5400)
    '1:30:00'
    """
    sign, magnitude = _rounded(value, precision)
    (_, hours), (_, minutes), (_, seconds) = units.split_seconds(magnitude, ("h", "min", "s"))
    whole = int(seconds)
    fraction = _number(seconds - whole, precision)[1:] if precision else ""
    if fraction == "" or fraction == "0":
        fraction = ""
    return f"{sign}{int(hours)}:{int(minutes):02d}:{whole:02d}{fraction}"


def format_iso(value: Duration | float, *, precision: int = 3) -> str:
    """The ISO 8601 notation with days, hours, minutes and seconds: ``"P1DT2H"``, ``"PT0S"``.

    Negative durations get a leading ``-``, as several ISO 8601 profiles allow.

    >>> format_iso(93784)
    'P1DT2H3M4S'
    """
    sign, magnitude = _rounded(value, precision)
    (_, days), (_, hours), (_, minutes), (_, seconds) = units.split_seconds(magnitude)
    date_part = f"{int(days)}D" if days else ""
    time_part = ""
    if hours:
        time_part += f"{int(hours)}H"
    if minutes:
        time_part += f"{int(minutes)}M"
    second_text = _number(seconds, precision)
    if second_text != "0":
        time_part += f"{second_text}S"
    if not date_part and not time_part:
        return "PT0S"
    return f"{sign}P{date_part}{'T' + time_part if time_part else ''}"
