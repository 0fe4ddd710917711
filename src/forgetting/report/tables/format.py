"""Numbers for reading: estimates with intervals, significance marks, CSV cells.

Every function is pure and locale-free, so equal inputs give equal bytes.
"""

from __future__ import annotations

import math
from typing import Any

#: raw significance (the CI excludes the null) and after Holm–Bonferroni
RAW_MARK = "*"
HOLM_MARK = "†"
#: the CI excludes the null, but on fewer than ``statistics.min_paired_tasks`` tasks: no mark
FEW_TASKS_MARK = "‡"
NA = "–"


def is_missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def number(x: Any, digits: int = 2, *, signed: bool = False) -> str:
    """``x`` rounded to ``digits`` decimals (``-0.00`` shown as ``0.00``), NA when missing."""
    if is_missing(x):
        return NA
    x = float(x)
    if math.isinf(x):
        return "∞" if x > 0 else "-∞"
    text = f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"
    if float(text) == 0:
        text = f"{0:.{digits}f}"
    return text


def count(x: Any) -> str:
    """A count: an integer as such, a mean over repeats with one decimal."""
    if is_missing(x):
        return NA
    x = float(x)
    return f"{round(x)}" if abs(x - round(x)) < 1e-9 else f"{x:.1f}"


def marks(raw: Any, holm: Any) -> str:
    return (RAW_MARK if raw is True else "") + (HOLM_MARK if holm is True else "")


def resamples_defined(defined: int, resamples: int) -> str:
    """`` (6511/10000)``: an interval on ``defined`` of ``resamples``; nothing when on all."""
    return "" if defined >= resamples else f" ({defined}/{resamples})"


def with_interval(estimate: Any, lo: Any, hi: Any, digits: int = 2, *, signed: bool = False) -> str:
    """``1.23 [1.10, 1.38]``; NA when the estimate is missing."""
    if is_missing(estimate):
        return NA

    def n(x: Any) -> str:
        return number(x, digits, signed=signed)

    return f"{n(estimate)} [{n(lo)}, {n(hi)}]"


def percent_change(ratio: Any, lo: Any, hi: Any) -> str:
    """A ratio as a change in percent: ``+73 % [+51, +98]`` for 1.73 [1.51, 1.98]."""
    if is_missing(ratio):
        return NA

    def pct(r: Any) -> str:
        if is_missing(r):
            return NA
        return number((float(r) - 1.0) * 100.0, 0, signed=True)

    return f"{pct(ratio)} % [{pct(lo)}, {pct(hi)}]"


def csv_cell(x: Any) -> str:
    """A CSV cell: floats with 6 significant digits, booleans as true/false, missing as empty."""
    if is_missing(x):
        return ""
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, float):
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        text = f"{x:.6g}"
        return "0" if text == "-0" else text
    return str(x)
