"""The study's figures (matplotlib, Agg), each as PDF and PNG, reproducible byte for byte.

=====================  ===================================================================
``cost_ratio``         cost ratio to the baseline under flat and caching-aware pricing, with
                       CIs, per configuration
``tasks_solved``       Δ tasks solved against the baseline with CIs, per configuration
``refetch_by_amount``  re-fetch rate ratio by deletion amount, per scope and granularity; the
                       policies beyond the paper as separate points (they share no amount axis)
``cost_breakdown``     caching-aware cost split into cached / new / re-billed / output,
                       relative to the baseline's total (bar length = cost ratio)
``cache_validation``   the gap between the reconstructed and the server-reported cached share,
                       with CIs, per configuration (baseline first) and pricing profile
=====================  ===================================================================

Every figure is :data:`FIGURE_WIDTH_IN` wide (a two-column paper's text width) whatever the
study; only its height grows, with the number of configurations. Configurations are rows with
horizontal labels, shortened to the policy's label and wrapped (``layout.row_label``; the tables
carry the full names), in one section per timing and one for the policies beyond the paper;
columns are agents (:mod:`forgetting.report.figures.layout`).

A number that is missing is drawn as missing, never as a point or a bar of zero width
(:mod:`forgetting.report.figures.marks`): an undefined estimate is written ``n/a`` (``∞`` for an
infinite ratio), an undefined or unbounded CI leaves the point without a bar and writes
``no CI`` (``CI ∞``) beside it; a footnote under the figure counts each kind.

Colours are the Okabe–Ito palette (distinguishable with every common colour-vision
deficiency); series also differ by marker or line style. Figures are drawn on
:class:`matplotlib.figure.Figure` objects (no pyplot state) and saved without time stamps or
version strings, so equal statistics give equal bytes.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from forgetting.deletion.names import SCOPE_LABELS
from forgetting.foundation.atomic import atomic_path
from forgetting.foundation.faults import checkpoint
from forgetting.foundation.layout import Files, Layout, output_files, select_outputs
from forgetting.foundation.stagelog import StageLog
from forgetting.report.figures.layout import (
    FIGURE_WIDTH_IN,
    Section,
    finish_figure,
    forest,
    scope_bands,
    sections_of,
)
from forgetting.report.figures.marks import MissingMarks, Point, draw_point, point_of
from forgetting.report.stats.labels import GRANULARITY_ORDER, SCOPE_ORDER, agent_label
from forgetting.report.tables import load_stats_tables
from forgetting.report.tables.build import StatsTables
from forgetting.report.tables.columns import too_few_tasks
from forgetting.report.tables.format import is_missing
from forgetting.study.config import Study

__all__ = ["BUILDERS", "FIGURES", "FIGURE_FORMATS", "FIGURE_WIDTH_IN", "PNG_DPI", "save_figure", "write_figures"]

FIGURES: tuple[str, ...] = ("cost_ratio", "tasks_solved", "refetch_by_amount", "cost_breakdown", "cache_validation")
FIGURE_FORMATS: tuple[str, ...] = ("pdf", "png")

#: Okabe & Ito (2008), "Color Universal Design"
OKABE_ITO = {
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "bluish_green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish_purple": "#CC79A7",
    "black": "#000000",
}
SCOPE_COLOURS = {
    "reasoning": OKABE_ITO["blue"],
    "tool_output": OKABE_ITO["vermillion"],
    "both": OKABE_ITO["bluish_green"],
}
OTHER_COLOUR = OKABE_ITO["reddish_purple"]
GRANULARITY_MARKERS = {"turn": "o", "token": "s"}
OTHER_MARKER = "D"
COMPONENT_COLOURS = {
    "cost_cached": OKABE_ITO["sky_blue"],
    "cost_new": OKABE_ITO["bluish_green"],
    "cost_rebilled": OKABE_ITO["vermillion"],
    "cost_cache_write": OKABE_ITO["reddish_purple"],
    "cost_output": OKABE_ITO["orange"],
}
COMPONENT_LABELS = {
    "cost_cached": "cached input",
    "cost_new": "new input",
    "cost_rebilled": "re-billed input",
    "cost_cache_write": "cache write",
    "cost_output": "output",
}

STYLE = {
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "xtick.labelsize": 7.5,
    "ytick.labelsize": 7,
    "legend.fontsize": 7.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.linewidth": 0.7,
    "svg.hashsalt": "forgetting",
    "pdf.fonttype": 42,
    "figure.dpi": 100,
}
PDF_METADATA = {"Creator": "forgetting", "Producer": None, "CreationDate": None, "ModDate": None}
PNG_METADATA = {"Software": None}
PNG_DPI = 150
REFERENCE = {"color": "#555555", "lw": 0.8, "ls": "--", "gid": "reference"}


def _ci(st: StatsTables) -> str:
    return f"{st.settings.confidence * 100:g} % CI"


def _scope_colour(r: Mapping[str, Any]) -> str:
    return SCOPE_COLOURS.get(r.get("scope") or "", OTHER_COLOUR)


def _has_other_colour(sections: Sequence[Section]) -> bool:
    """Whether a configuration is drawn in :data:`OTHER_COLOUR` (it has no scope of the paper's)."""
    return any((r.get("scope") or "") not in SCOPE_COLOURS for s in sections for r in s.rows)


def _scope_legend() -> list[Any]:
    from matplotlib.lines import Line2D

    return [Line2D([], [], color=c, marker="o", ls="", label=SCOPE_LABELS[s]) for s, c in SCOPE_COLOURS.items()]


def _panels(
    st: StatsTables, sections: Sequence[Section], axes: Any, *, ref: float
) -> Iterator[tuple[Any, str, Section]]:
    """The panels of a forest figure (a section by an agent), each with its reference line at
    ``ref`` drawn before the caller draws its points, and its scope bands after."""
    for si, section in enumerate(sections):
        for ai, agent in enumerate(st.agents):
            ax = axes[si][ai]
            ax.axvline(ref, **REFERENCE)
            yield ax, agent, section
            scope_bands(ax, section)


def cost_ratio(st: StatsTables) -> Any:
    from matplotlib.lines import Line2D

    marks = MissingMarks(_ci(st), st.settings.resamples)
    sections = sections_of(st)
    series = [
        ("cost_flat", "flat pricing", OKABE_ITO["blue"], "o", -0.2),
        ("cost_cache", "caching-aware pricing", OKABE_ITO["vermillion"], "s", 0.2),
    ]
    fig, axes = forest(st, sections, xlabel="cost / baseline cost")
    for ax, agent, section in _panels(st, sections, axes, ref=1.0):
        for k, r in zip(section.positions, section.rows, strict=True):
            for metric, _, colour, marker, dy in series:
                p = point_of(marks.effect(st.effects.get((agent, r["configuration"], metric))))
                draw_point(ax, k + dy, p, marks, ref=1.0, colour=colour, marker=marker, size=3.5)
    handles: list[Any] = [Line2D([], [], color=c, marker=m, ls="", label=lab) for _, lab, c, m, _ in series]
    finish_figure(
        fig,
        f"Estimated cost relative to the uncompressed baseline ({_ci(st)}s)",
        st,
        handles,
        marks,
    )
    return fig


def tasks_solved(st: StatsTables) -> Any:
    from matplotlib.lines import Line2D

    marks = MissingMarks(_ci(st), st.settings.resamples)
    sections = sections_of(st)

    def solved(agent: str) -> str:
        base = st.baseline(agent)
        n = base.get("tasks_solved") if base else None
        return f"{agent_label(agent)} {'n/a' if is_missing(n) else f'{n:.1f}'}"

    fig, axes = forest(st, sections, xlabel="Δ tasks solved vs baseline")
    for ax, agent, section in _panels(st, sections, axes, ref=0.0):
        for k, r in zip(section.positions, section.rows, strict=True):
            e = marks.effect(st.effects.get((agent, r["configuration"], "tasks_solved")))
            # filled: significant, on enough paired tasks to say so (statistics.min_paired_tasks)
            significant = bool(e and e.get("significant")) and too_few_tasks(e, st.settings) is None
            draw_point(ax, k, point_of(e), marks, ref=0.0, colour=_scope_colour(r), marker="o", filled=significant)
    handles = _scope_legend()
    if _has_other_colour(sections):
        handles.append(Line2D([], [], color=OTHER_COLOUR, marker="o", ls="", label="other policy"))
    few = any(
        e.get("significant") and too_few_tasks(e, st.settings) is not None
        for e in st.effects.values() if e.get("metric") == "tasks_solved"
    )
    hollow = f"{_ci(st)} includes 0" + (f", or under {st.settings.min_paired_tasks} tasks" if few else "")
    handles.append(Line2D([], [], color="#555555", marker="o", mfc="white", ls="", label=hollow))
    finish_figure(
        fig,
        f"Tasks solved: difference to the baseline with {_ci(st)}s",
        st,
        handles,
        marks,
        subtitle="Baseline tasks solved (mean over repeats): " + ", ".join(solved(a) for a in st.agents),
    )
    return fig


def _log_axis(axis: Any) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def _refetch_amounts(ax: Any, agent: str, section: Section, st: StatsTables, marks: MissingMarks) -> None:
    """Re-fetch ratio against the amount deleted: one line per scope × granularity (the same
    policy at growing amounts), the two granularities set apart a little."""
    rows = [r for r in section.rows if r.get("scope") in SCOPE_ORDER and not is_missing(r.get("amount"))]
    styles = {"turn": ("-", -1.2), "token": ("--", 1.2)}
    for scope in SCOPE_ORDER:
        for gran in GRANULARITY_ORDER:
            sel = [r for r in rows if r.get("scope") == scope and r.get("granularity") == gran]
            if not sel:
                continue
            ls, dx = styles[gran]
            xs = [float(r["amount"]) + dx for r in sel]
            pts = [point_of(marks.effect(st.effects.get((agent, r["configuration"], "refetch_rate"))), log=True)
                   for r in sel]
            ys = [p.estimate if p.estimate is not None else math.nan for p in pts]
            if len(sel) > 1:
                ax.plot(xs, ys, color=SCOPE_COLOURS[scope], ls=ls, lw=1.1, gid="amount-line")
            for x, p in zip(xs, pts, strict=True):
                draw_point(
                    ax,
                    x,
                    p,
                    marks,
                    ref=1.0,
                    colour=SCOPE_COLOURS[scope],
                    marker=GRANULARITY_MARKERS[gran],
                    horizontal=False,
                )
    amounts = sorted({float(r["amount"]) for r in rows})
    if amounts:
        ax.set_xticks(amounts, [f"{a:g}" for a in amounts])
        ax.set_xlim(amounts[0] - 10, amounts[-1] + 10)
    ax.axhline(1.0, **REFERENCE)
    ax.set_yscale("log")
    ax.margins(y=0.12)
    _log_axis(ax.yaxis)
    ax.set_xlabel("amount deleted (%)")
    ax.grid(axis="y", color="#dddddd", lw=0.6)
    ax.set_axisbelow(True)


def _refetch_policies(ax: Any, agent: str, section: Section, st: StatsTables, marks: MissingMarks) -> None:
    """Policies beyond the paper: one point per configuration, nothing joins them."""
    ax.axvline(1.0, **REFERENCE)
    for k, r in zip(section.positions, section.rows, strict=True):
        p = point_of(marks.effect(st.effects.get((agent, r["configuration"], "refetch_rate"))), log=True)
        marker = GRANULARITY_MARKERS.get(r.get("granularity") or "", OTHER_MARKER)
        draw_point(ax, k, p, marks, ref=1.0, colour=_scope_colour(r), marker=marker)
    ax.set_xscale("log")
    _log_axis(ax.xaxis)


def refetch_by_amount(st: StatsTables) -> Any:
    from matplotlib.lines import Line2D

    marks = MissingMarks(_ci(st), st.settings.resamples)
    sections = sections_of(st)
    fig, axes = forest(
        st,
        sections,
        xlabel="re-fetch rate / baseline (log scale)",
        plot_height_in={s.key: 1.3 for s in sections if s.key != "other"},
        share_x=False,
    )
    # the agents' panels of a section on one value axis (re-fetch ratio: y on the amount panels,
    # x on the policies'), so they compare side by side
    for si, section in enumerate(sections):
        for ai in range(1, len(st.agents)):
            share = axes[si][ai].sharex if section.key == "other" else axes[si][ai].sharey
            share(axes[si][0])
    for si, section in enumerate(sections):
        for ai, agent in enumerate(st.agents):
            ax = axes[si][ai]
            if section.key == "other":
                _refetch_policies(ax, agent, section, st, marks)
            else:
                _refetch_amounts(ax, agent, section, st, marks)
                ax.set_ylabel("re-fetch rate / baseline" if ai == 0 else "")
    handles = [Line2D([], [], color=c, lw=1.2, label=SCOPE_LABELS[s]) for s, c in SCOPE_COLOURS.items()]
    handles += [
        Line2D([], [], color="#555555", ls=ls, marker=GRANULARITY_MARKERS[g], label=f"{g}-level")
        for g, ls in (("turn", "-"), ("token", "--"))
    ]
    if _has_other_colour(sections):
        handles.append(Line2D([], [], color=OTHER_COLOUR, marker=OTHER_MARKER, ls="", label="other policy"))
    finish_figure(
        fig, f"Re-fetch rate relative to the baseline, by amount deleted ({_ci(st)}s, log scale)", st, handles, marks
    )
    return fig


def _components(row: Mapping[str, Any] | None, comps: Sequence[str]) -> list[float] | None:
    """The row's cost components, None when there is no row or one of them is missing."""
    if row is None or any(is_missing(row.get(c)) for c in comps):
        return None
    return [float(row[c]) for c in comps]


def cost_breakdown(st: StatsTables) -> Any:
    from matplotlib.patches import Patch

    marks = MissingMarks(_ci(st), st.settings.resamples)
    sections = sections_of(st, with_baseline=True)
    comps = [
        c for c in COMPONENT_COLOURS if c != "cost_cache_write" or any((r.get(c) or 0) > 0 for r in st.summary.values())
    ]
    fig, axes = forest(st, sections, xlabel="cost / baseline total cost")
    for si, section in enumerate(sections):
        for ai, agent in enumerate(st.agents):
            ax = axes[si][ai]
            for k, r in zip(section.positions, section.rows, strict=True):
                row = st.summary.get((agent, str(r["configuration"])))
                values = _components(row, comps)
                # the baseline's cost on the row's own tasks (as the cost breakdown table): one task set per row
                base = None if row is None else row.get("baseline_cost")
                base_total = None if is_missing(base) or not base else float(base)
                if base_total is None or values is None:
                    missing = Point(None, None, None, "no_estimate")
                    draw_point(ax, k, missing, marks, ref=0.0, colour="#333333", marker="", mark_align="left")
                    continue
                left = 0.0
                for c, v in zip(comps, values, strict=True):
                    w = v / base_total
                    ax.barh(k, w, left=left, color=COMPONENT_COLOURS[c], height=0.72, edgecolor="white", lw=0.3)
                    left += w
            ax.axvline(1.0, **REFERENCE)
            scope_bands(ax, section)
    handles = [Patch(color=COMPONENT_COLOURS[c], label=COMPONENT_LABELS[c]) for c in comps]
    title = "Caching-aware cost by component, relative to the baseline's cost on the same tasks"
    finish_figure(fig, title, st, handles, marks)
    return fig


#: the pricing profiles' series in the cache validation figure, in the profiles' order
PROFILE_STYLES = (
    (OKABE_ITO["blue"], "o"),
    (OKABE_ITO["vermillion"], "s"),
    (OKABE_ITO["bluish_green"], "D"),
    (OKABE_ITO["reddish_purple"], "^"),
    (OKABE_ITO["orange"], "v"),
    (OKABE_ITO["sky_blue"], "P"),
    (OKABE_ITO["black"], "X"),
)


def cache_validation(st: StatsTables) -> Any:
    """Reconstructed minus reported cached share (percentage points), one series per profile."""
    from matplotlib.lines import Line2D

    marks = MissingMarks(_ci(st), st.settings.resamples)
    sections = sections_of(st, with_baseline=True)
    profiles = st.profiles
    styles = {p: PROFILE_STYLES[i % len(PROFILE_STYLES)] for i, p in enumerate(profiles)}
    spread = 0.6 / max(1, len(profiles))
    offsets = {p: (i - (len(profiles) - 1) / 2) * spread for i, p in enumerate(profiles)}
    fig, axes = forest(st, sections, xlabel="reconstructed − reported cached share (pp)")
    unreported = 0
    for si, section in enumerate(sections):
        for ai, agent in enumerate(st.agents):
            ax = axes[si][ai]
            ax.axvline(0.0, **REFERENCE)
            for k, r in zip(section.positions, section.rows, strict=True):
                for profile in profiles:
                    v = marks.effect(st.validation.get((agent, str(r["configuration"]), profile)))
                    if v is not None and not v["reported_calls"]:
                        unreported += 1
                    pp = None if v is None else {key: v[key] * 100 for key in ("estimate", "ci_low", "ci_high")}
                    colour, marker = styles[profile]
                    draw_point(ax, k + offsets[profile], point_of(pp), marks, ref=0.0, colour=colour, marker=marker,
                               size=3.5)
            scope_bands(ax, section)
    handles: list[Any] = [Line2D([], [], color=styles[p][0], marker=styles[p][1], ls="", label=p) for p in profiles]
    notes = []
    if unreported:
        notes.append(
            f"{unreported} point(s) n/a: no call of those runs reported cached tokens (the server's cache is "
            "unknown there, not 0)."
        )
    finish_figure(
        fig,
        f"Cache validation: reconstructed minus server-reported cached share, percentage points ({_ci(st)}s)",
        st,
        handles,
        marks,
        notes=notes,
    )
    return fig


BUILDERS = {
    "cost_ratio": cost_ratio,
    "tasks_solved": tasks_solved,
    "refetch_by_amount": refetch_by_amount,
    "cost_breakdown": cost_breakdown,
    "cache_validation": cache_validation,
}


def save_figure(fig: Any, path: str | os.PathLike[str]) -> None:
    """Save ``fig`` atomically as PDF or PNG (by suffix), without time stamps or version strings."""
    suffix = Path(path).suffix.lower()
    with atomic_path(path) as tmp:
        if suffix == ".pdf":
            fig.savefig(tmp, format="pdf", metadata=PDF_METADATA)
        elif suffix == ".png":
            fig.savefig(tmp, format="png", dpi=PNG_DPI, metadata=PNG_METADATA)
        else:
            raise ValueError(f"{path}: unknown figure format {suffix!r}; expected .pdf or .png")


def figure_paths(figures_dir: str | os.PathLike[str]) -> dict[str, dict[str, Path]]:
    return output_files(figures_dir, FIGURES, FIGURE_FORMATS)


def write_figures(
    study: Study, inputs: Files | None = None, outputs: Files | None = None, log: str | os.PathLike[str] | None = None
) -> list[Path]:
    """Every figure of :data:`FIGURES` as PDF and PNG (or the ``outputs`` named ``{figure}.{fmt}``)."""
    import matplotlib

    wanted, by_figure = select_outputs(figure_paths(Layout(study.results_dir).figures), outputs, "figure")
    st = load_stats_tables(study, inputs)
    with StageLog(log) as out, matplotlib.rc_context(STYLE):
        for name, paths in by_figure.items():
            fig = build_figure(name, st)
            for p in paths:
                save_figure(fig, p)
            checkpoint("figures.figure")
            out.line(f"figure {name} → {', '.join(str(p) for p in paths)}")
    return wanted


def build_figure(name: str, st: StatsTables) -> Any:
    """The figure ``name`` of :data:`FIGURES`, drawn in the figures' style."""
    import matplotlib

    with matplotlib.rc_context(STYLE):
        fig = BUILDERS[name](st)
        freeze_layout(fig)
    return fig


def freeze_layout(fig: Any, digits: int = 4) -> None:
    """Run the constrained layout once, round every panel's position to ``digits`` decimals
    of the figure and fix it there. The layout solver's last bits vary from run to run
    (~1e-10 of the page), which would change a PDF's bytes; the rounded positions do not."""
    fig.draw_without_rendering()
    boxes = [(ax, [round(v, digits) for v in ax.get_position().bounds]) for ax in fig.axes]
    fig.set_layout_engine("none")
    for ax, bounds in boxes:
        ax.set_position(bounds)
