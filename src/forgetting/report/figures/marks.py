"""Missing numbers in the figures, drawn as missing and counted for a footnote.

An effect's estimate and CI bounds come from ``stats/effects.parquet``; any of them may be NaN
(undefined: no runs, a ratio of zero to zero, no resample with a value) or infinite (a ratio to
a baseline of zero). A figure never draws such a number as a point or as a bar of zero width:

=================  ==========  ============================================================
kind               drawn as    when
=================  ==========  ============================================================
``no_estimate``    ``n/a``     the estimate is undefined (or the effect is absent)
``infinite``       ``∞``       the estimate is an infinite ratio
``zero``           ``0``       a ratio of 0 on a log scale, which cannot show it
``no_ci``          ``no CI``   the estimate is defined, a CI bound is undefined: point, no bar
``unbounded_ci``   ``CI ∞``    the estimate is defined, a CI bound is infinite: the point, a
                               bar to its finite bound and an arrow off the axis on the other side
=================  ==========  ============================================================

Each text is a matplotlib artist with ``gid="missing:<kind>"``, in the colour of the series
it stands for; :class:`MissingMarks` counts them per figure and writes the footnote that
explains each kind that occurs.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MARK_TEXT = {"no_estimate": "n/a", "infinite": "∞", "zero": "0", "no_ci": "no CI", "unbounded_ci": "CI ∞"}
MARK_SIZE = 7


@dataclass(frozen=True)
class Point:
    """An estimate with its error-bar lengths below and above, or what is missing."""

    estimate: float | None  # finite; None when missing (``mark`` says why)
    below: float | None  # None: no bar (``mark`` says why)
    above: float | None
    mark: str | None = None  # a key of MARK_TEXT, None when complete


def _finite(x: Any) -> bool:
    return x is not None and not math.isnan(x) and not math.isinf(x)


def point_of(effect: Mapping[str, Any] | None, *, log: bool = False) -> Point:
    """The point to draw for an effects row (None: no row); ``log``: on a log scale, where an
    estimate of 0 cannot be drawn (a CI bound of 0 draws its bar to the axis' end)."""
    est = None if effect is None else effect.get("estimate")
    if est is None or math.isnan(est):
        return Point(None, None, None, "no_estimate")
    if math.isinf(est):
        return Point(None, None, None, "infinite")
    if log and est <= 0:
        return Point(None, None, None, "zero")
    lo, hi = effect.get("ci_low"), effect.get("ci_high")  # type: ignore[union-attr]
    if lo is None or hi is None or math.isnan(lo) or math.isnan(hi):
        return Point(est, None, None, "no_ci")
    if not (_finite(lo) and _finite(hi)):
        # what can be drawn: the bar to the finite bound (the infinite side is an arrow)
        return Point(est, max(0.0, est - lo) if _finite(lo) else None, max(0.0, hi - est) if _finite(hi) else None,
                     "unbounded_ci")
    return Point(est, max(0.0, est - lo), max(0.0, hi - est))


class MissingMarks:
    """The missing numbers one figure drew, by kind, and the footnote that explains them."""

    def __init__(self, ci: str = "95 % CI", resamples: int | None = None) -> None:
        self.ci = ci
        self.counts: Counter[str] = Counter()
        #: the study's resamples, and the defined resamples of each drawn interval on fewer
        self.resamples = resamples
        self.fewer_resamples: list[int] = []

    def effect(self, effect: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
        """Note an effect about to be drawn: an interval on fewer than all resamples is counted
        for the footnote (``n_undefined``: the resamples where the statistic is undefined)."""
        if effect is not None and self.resamples:
            undefined = effect.get("n_undefined")
            est = effect.get("estimate")
            if undefined and est is not None and not math.isnan(est) and int(undefined) < self.resamples:
                self.fewer_resamples.append(self.resamples - int(undefined))
        return effect

    def text(self, kind: str) -> str:
        self.counts[kind] += 1
        return MARK_TEXT[kind]

    def footnote(self) -> list[str]:
        """One line per kind that occurs, in :data:`MARK_TEXT` order; empty when none."""
        why = {
            "no_estimate": "no estimate: the statistic is undefined (no runs, a missing value, or zero over zero)",
            "infinite": "an infinite ratio: the baseline's value is zero",
            "zero": "a ratio of zero (none at all), which a log scale cannot show; written at its low end",
            "no_ci": f"the {self.ci} is undefined (no bootstrap resample gives a value); the point has no bar",
            "unbounded_ci": (
                f"the {self.ci} is unbounded: the baseline's value is 0 in more resamples than the interval's "
                "tail holds (e.g. none of the resampled tasks' baseline runs re-fetched), and a ratio to 0 is "
                "infinite; the bar runs to the finite bound, the arrow off the axis stands for the infinite one"
            ),
        }
        lines = [f"{MARK_TEXT[k]} ({self.counts[k]}×): {why[k]}." for k in MARK_TEXT if self.counts[k]]
        if self.fewer_resamples:
            n = len(self.fewer_resamples)
            lines.append(
                f"{n} {'interval rests' if n == 1 else 'intervals rest'} on fewer than all {self.resamples} "
                "resamples: the statistic is undefined in the others (0/0, e.g. no re-fetch among the resampled "
                f"tasks), which are left out; the fewest: {min(self.fewer_resamples)}. The tables give each count."
            )
        return lines


def draw_point(
    ax: Any,
    pos: float,
    p: Point,
    marks: MissingMarks,
    *,
    ref: float,
    colour: str,
    marker: str,
    filled: bool = True,
    horizontal: bool = True,
    size: float = 4.0,
    mark_align: str = "center",
) -> None:
    """Draw ``p`` at row ``pos`` (``horizontal``: value on x, else value on y at x = ``pos``).

    A missing estimate writes its mark on the reference value ``ref`` (``mark_align``: centred
    on it or beside it), at the far end of the value axis for an infinite one and at the near
    end for a zero on a log scale; a missing CI
    draws the point without a bar and writes its mark to its right.
    """
    face = colour if filled else "white"
    if p.estimate is None:
        text = marks.text(p.mark or "no_estimate")
        style = {"fontsize": MARK_SIZE, "color": colour, "gid": f"missing:{p.mark}"}
        if p.mark in ("infinite", "zero"):  # at the far (near) end of the value axis
            end = 0.99 if p.mark == "infinite" else 0.01
            if horizontal:
                ha = "right" if p.mark == "infinite" else "left"
                ax.text(end, pos, text, ha=ha, va="center", transform=ax.get_yaxis_transform(), **style)
            else:
                va = "top" if p.mark == "infinite" else "bottom"
                ax.text(pos, end, text, ha="center", va=va, transform=ax.get_xaxis_transform(), **style)
        elif horizontal:  # on the reference line, masking it
            box = {"fc": "white", "ec": "none", "pad": 0.6}
            dx = {"center": 0, "left": 3, "right": -3}[mark_align]
            ax.annotate(
                text,
                (ref, pos),
                xytext=(dx, 0),
                textcoords="offset points",
                ha=mark_align,
                va="center",
                bbox=box,
                **style,
            )
        else:
            ax.text(pos, ref, text, ha="center", va="center", **style)
        return
    xy = (p.estimate, pos) if horizontal else (pos, p.estimate)
    if p.mark is None:
        bars = [[p.below], [p.above]]
        ax.errorbar(
            [xy[0]],
            [xy[1]],
            xerr=bars if horizontal else None,
            yerr=None if horizontal else bars,
            fmt=marker,
            color=colour,
            mfc=face,
            mec=colour,
            ms=size,
            lw=1,
            capsize=0,
        )
        return
    if p.mark == "unbounded_ci":
        _draw_unbounded(ax, pos, p, colour=colour, marker=marker, face=face, size=size, horizontal=horizontal)
    else:
        ax.plot([xy[0]], [xy[1]], ls="none", marker=marker, color=colour, mfc=face, mec=colour, ms=size)
    ax.annotate(
        marks.text(p.mark),
        xy,
        xytext=(4, 0),
        textcoords="offset points",
        ha="left",
        va="center",
        fontsize=MARK_SIZE,
        color=colour,
        gid=f"missing:{p.mark}",
    )


def _draw_unbounded(
    ax: Any, pos: float, p: Point, *, colour: str, marker: str, face: str, size: float, horizontal: bool
) -> None:
    """A point whose CI has an infinite bound: a bar to the finite bound (when it has one) and
    an arrow from the point off the value axis' end on the infinite side."""
    assert p.estimate is not None
    xy = (p.estimate, pos) if horizontal else (pos, p.estimate)
    below = [p.below or 0.0]
    above = [p.above or 0.0]
    bars = [below, above] if (p.below or p.above) else None
    ax.errorbar([xy[0]], [xy[1]], xerr=bars if horizontal else None, yerr=None if horizontal else bars,
                fmt=marker, color=colour, mfc=face, mec=colour, ms=size, lw=1, capsize=0)
    for side, end in (("below", 0.0), ("above", 1.0)):
        if getattr(p, side) is not None:
            continue
        target = (end, pos) if horizontal else (pos, end)
        ax.annotate("", xy=target, xycoords=ax.get_yaxis_transform() if horizontal else ax.get_xaxis_transform(),
                    xytext=xy, textcoords="data", gid="unbounded-ci-arrow",
                    arrowprops={"arrowstyle": "-|>", "color": colour, "lw": 1, "shrinkA": 0, "shrinkB": 0,
                                "mutation_scale": 6})
