"""The study's figures (matplotlib, Agg), each as PDF and PNG, reproducible byte for byte.

=====================  ===================================================================
``cost_ratio``         cost ratio to the baseline under flat and caching-aware pricing, with
                       95 % CIs, per configuration (rows: agents; columns: timings)
``tasks_solved``       Δ tasks solved against the baseline with 95 % CIs, per configuration
``refetch_by_amount``  re-fetch rate ratio by deletion amount, per scope and granularity
``cost_breakdown``     caching-aware cost split into cached / new / re-billed / output,
                       relative to the baseline's total (bar height = cost ratio)
=====================  ===================================================================

Colours are the Okabe–Ito palette (distinguishable with every common colour-vision
deficiency); series also differ by marker or line style. Figures are drawn on
:class:`matplotlib.figure.Figure` objects (no pyplot state) and saved without time stamps or
version strings, so equal statistics give equal bytes.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from forgetting.atomic import atomic_path
from forgetting.config import Study
from forgetting.faults import checkpoint
from forgetting.layout import Layout
from forgetting.stagelog import StageLog
from forgetting.stats.labels import (
    GRANULARITY_ORDER,
    SCOPE_LABELS,
    SCOPE_ORDER,
    TIMING_ORDER,
    agent_label,
    amount_label,
    is_paper_like,
)
from forgetting.tables.build import StatsTables
from forgetting.tables.format import is_missing

FIGURES: tuple[str, ...] = ("cost_ratio", "tasks_solved", "refetch_by_amount", "cost_breakdown")
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
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "xtick.labelsize": 7.5,
    "ytick.labelsize": 8,
    "legend.fontsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "svg.hashsalt": "forgetting",
    "pdf.fonttype": 42,
    "figure.dpi": 100,
}
PDF_METADATA = {"Creator": "forgetting", "Producer": None, "CreationDate": None, "ModDate": None}
PNG_METADATA = {"Software": None}
PNG_DPI = 150


def _panel(r: Mapping[str, Any]) -> str:
    """The column a configuration is drawn in: its timing for the paper's policy, else ``other``
    (policies beyond the paper, with their names as ticks)."""
    return str(r["timing"]) if is_paper_like(r) else "other"


def _panel_title(panel: str) -> str:
    return "beyond the paper" if panel == "other" else panel


def _timings(st: StatsTables, agent: str) -> list[str]:
    present = {_panel(r) for r in st.evaluations(lambda r: r["agent"] == agent)}
    return [t for t in (*TIMING_ORDER, "other") if t in present]


def _panel_layout(st: StatsTables) -> tuple[list[str], list[str]]:
    agents = list(dict.fromkeys(a for a, _ in st.summary_order))
    timings: list[str] = []
    for a in agents:
        for t in _timings(st, a):
            if t not in timings:
                timings.append(t)
    order = [t for t in (*TIMING_ORDER, "other") if t in timings]
    return agents, order or ["delayed"]


def _rows(st: StatsTables, agent: str, timing: str) -> list[dict[str, Any]]:
    def keep(r: Mapping[str, Any]) -> bool:
        return r["agent"] == agent and _panel(r) == timing

    return st.evaluations(keep)


def _tick(r: Mapping[str, Any]) -> str:
    if not is_paper_like(r) or r.get("scope") is None:
        return str(r["configuration"])
    return f"{r.get('granularity')} {amount_label(r.get('amount'))}"


def _scope_bands(ax: Any, rows: Sequence[Mapping[str, Any]], first: int = 0) -> None:
    """Shade every other scope's band of x positions and name each scope above its band.

    ``first`` skips leading positions that belong to no scope (the baseline bar).
    """
    start = first
    for i in range(first + 1, len(rows) + 1):
        if i == len(rows) or rows[i].get("scope") != rows[start].get("scope"):
            scope = rows[start].get("scope")
            if scope in SCOPE_ORDER and SCOPE_ORDER.index(scope) % 2 == 1:
                ax.axvspan(start - 0.5, i - 0.5, color="#000000", alpha=0.05, lw=0)
            label = SCOPE_LABELS.get(scope, str(scope)) if scope else "other"
            ax.text(
                (start + i - 1) / 2,
                1.0,
                label,
                transform=ax.get_xaxis_transform(),
                ha="center",
                va="bottom",
                fontsize=8,
                color="#333333",
            )
            start = i


def _finish_axes(ax: Any, rows: Sequence[Mapping[str, Any]]) -> None:
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([_tick(r) for r in rows], rotation=90)
    ax.set_xlim(-0.6, len(rows) - 0.4)
    ax.grid(axis="y", color="#dddddd", lw=0.6)
    ax.set_axisbelow(True)
    _scope_bands(ax, rows)


def _err(e: Mapping[str, Any] | None) -> tuple[float, float, float]:
    if not e or e.get("estimate") is None or math.isnan(e["estimate"]):
        return (math.nan, 0.0, 0.0)
    est, lo, hi = e["estimate"], e.get("ci_low"), e.get("ci_high")
    lo = est if lo is None or math.isnan(lo) else lo
    hi = est if hi is None or math.isnan(hi) else hi
    return (est, max(0.0, est - lo), max(0.0, hi - est))


def _grid(
    st: StatsTables, height_per_row: float = 3.2, width_per_col: float = 7.0
) -> tuple[Any, Any, list, list]:
    from matplotlib.figure import Figure

    agents, timings = _panel_layout(st)
    fig = Figure(
        figsize=(width_per_col * len(timings), height_per_row * len(agents) + 0.9), layout="constrained"
    )
    axes = fig.subplots(len(agents), len(timings), squeeze=False)
    return fig, axes, agents, timings


def _title(fig: Any, text: str, st: StatsTables) -> None:
    fig.suptitle(text + (f"\n{st.provenance}" if st.provenance else ""), fontsize=11)


def cost_ratio(st: StatsTables) -> Any:
    fig, axes, agents, timings = _grid(st)
    series = [
        ("cost_flat", "flat pricing", OKABE_ITO["blue"], "o", -0.17),
        ("cost_cache", "caching-aware pricing", OKABE_ITO["vermillion"], "s", 0.17),
    ]
    for i, agent in enumerate(agents):
        for j, timing in enumerate(timings):
            ax = axes[i][j]
            rows = _rows(st, agent, timing)
            ax.axhline(1.0, color="#555555", lw=0.8, ls="--")
            for metric, label, colour, marker, dx in series:
                pts = [_err(st.effects.get((agent, r["configuration"], metric))) for r in rows]
                xs = [k + dx for k in range(len(rows))]
                ax.errorbar(
                    xs,
                    [p[0] for p in pts],
                    yerr=[[p[1] for p in pts], [p[2] for p in pts]],
                    fmt=marker,
                    color=colour,
                    ms=4,
                    lw=1,
                    capsize=0,
                    label=label,
                )
            _finish_axes(ax, rows)
            ax.set_title(f"{agent_label(agent)} · {_panel_title(timing)}", pad=14)
            if j == 0:
                ax.set_ylabel("cost / baseline cost")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=2, frameon=False)
    _title(fig, "Estimated cost relative to the uncompressed baseline (95 % CIs)", st)
    return fig


def tasks_solved(st: StatsTables) -> Any:
    from matplotlib.lines import Line2D

    fig, axes, agents, timings = _grid(st)
    for i, agent in enumerate(agents):
        base = st.baseline(agent)
        for j, timing in enumerate(timings):
            ax = axes[i][j]
            rows = _rows(st, agent, timing)
            ax.axhline(0.0, color="#555555", lw=0.8, ls="--")
            for k, r in enumerate(rows):
                e = st.effects.get((agent, r["configuration"], "tasks_solved"))
                est, lo, hi = _err(e)
                colour = SCOPE_COLOURS.get(r.get("scope"), OTHER_COLOUR)
                significant = bool(e and e.get("significant"))
                ax.errorbar(
                    [k],
                    [est],
                    yerr=[[lo], [hi]],
                    fmt="o",
                    ms=4.5,
                    lw=1,
                    color=colour,
                    mfc=colour if significant else "white",
                    mec=colour,
                )
            _finish_axes(ax, rows)
            solved = f" (baseline {base['tasks_solved']:.1f} solved)" if base else ""
            ax.set_title(f"{agent_label(agent)} · {_panel_title(timing)}{solved}", pad=14)
            if j == 0:
                ax.set_ylabel("Δ tasks solved vs baseline")
    handles = [
        Line2D([], [], color=c, marker="o", ls="", label=SCOPE_LABELS[s]) for s, c in SCOPE_COLOURS.items()
    ]
    handles.append(Line2D([], [], color="#555555", marker="o", mfc="white", ls="", label="CI includes 0"))
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), frameon=False)
    _title(fig, "Tasks solved: difference to the baseline with 95 % CIs", st)
    return fig


def refetch_by_amount(st: StatsTables) -> Any:
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FixedLocator, NullFormatter, ScalarFormatter

    fig, axes, agents, timings = _grid(st, height_per_row=3.0, width_per_col=4.8)
    styles = {"turn": ("-", "o"), "token": ("--", "s")}
    for i, agent in enumerate(agents):
        for j, timing in enumerate(timings):
            ax = axes[i][j]
            rows = [
                r
                for r in _rows(st, agent, timing)
                if r.get("scope") in SCOPE_ORDER and not is_missing(r.get("amount"))
            ]
            ax.axhline(1.0, color="#555555", lw=0.8, ls=":")
            for scope in SCOPE_ORDER:
                for gran in GRANULARITY_ORDER:
                    sel = [r for r in rows if r.get("scope") == scope and r.get("granularity") == gran]
                    if not sel:
                        continue
                    pts = [_err(st.effects.get((agent, r["configuration"], "refetch_rate"))) for r in sel]
                    xs = [float(r["amount"]) + (-1.2 if gran == "turn" else 1.2) for r in sel]
                    ls, marker = styles.get(gran, ("-", "o"))
                    ax.errorbar(
                        xs,
                        [p[0] for p in pts],
                        yerr=[[p[1] for p in pts], [p[2] for p in pts]],
                        color=SCOPE_COLOURS[scope],
                        ls=ls,
                        marker=marker,
                        ms=4,
                        lw=1.2,
                        capsize=0,
                    )
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(FixedLocator([0.5, 1, 2, 5, 10, 20]))
            ax.yaxis.set_major_formatter(ScalarFormatter())
            ax.yaxis.set_minor_formatter(NullFormatter())
            ax.set_xticks([25, 50, 75, 100])
            ax.set_xlabel("amount deleted (%)")
            ax.grid(axis="y", color="#dddddd", lw=0.6)
            ax.set_title(f"{agent_label(agent)} · {_panel_title(timing)}")
            if j == 0:
                ax.set_ylabel("re-fetch rate / baseline")
    handles = [Line2D([], [], color=c, lw=1.5, label=SCOPE_LABELS[s]) for s, c in SCOPE_COLOURS.items()]
    handles += [
        Line2D([], [], color="#555555", ls=styles[g][0], marker=styles[g][1], label=f"{g}-level")
        for g in GRANULARITY_ORDER
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), frameon=False)
    _title(fig, "Re-fetch rate relative to the baseline, by amount deleted (95 % CIs, log scale)", st)
    return fig


def cost_breakdown(st: StatsTables) -> Any:
    from matplotlib.patches import Patch

    fig, axes, agents, timings = _grid(st)
    comps = [
        c
        for c in COMPONENT_COLOURS
        if c != "cost_cache_write" or any((r.get(c) or 0) > 0 for r in st.summary.values())
    ]
    for i, agent in enumerate(agents):
        base = st.baseline(agent)
        base_total = sum(float(base.get(c) or 0) for c in comps) if base else 0.0
        for j, timing in enumerate(timings):
            ax = axes[i][j]
            rows = ([base] if base else []) + _rows(st, agent, timing)
            bottom = [0.0] * len(rows)
            for c in comps:
                heights = [(float(r.get(c) or 0) / base_total if base_total else 0.0) for r in rows]
                ax.bar(
                    range(len(rows)),
                    heights,
                    bottom=bottom,
                    color=COMPONENT_COLOURS[c],
                    width=0.75,
                    label=COMPONENT_LABELS[c],
                    edgecolor="white",
                    lw=0.3,
                )
                bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
            ax.axhline(1.0, color="#555555", lw=0.8, ls="--")
            ax.set_xticks(range(len(rows)))
            ax.set_xticklabels(
                ["baseline" if r["configuration"] == "baseline" else _tick(r) for r in rows], rotation=90
            )
            ax.set_xlim(-0.6, len(rows) - 0.4)
            ax.grid(axis="y", color="#dddddd", lw=0.6)
            ax.set_axisbelow(True)
            _scope_bands(ax, rows, first=1 if base else 0)
            ax.set_title(f"{agent_label(agent)} · {_panel_title(timing)}", pad=14)
            if j == 0:
                ax.set_ylabel("cost / baseline total cost")
    handles = [Patch(color=COMPONENT_COLOURS[c], label=COMPONENT_LABELS[c]) for c in comps]
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), frameon=False)
    _title(fig, "Caching-aware cost by component, relative to the baseline's total cost", st)
    return fig


BUILDERS = {
    "cost_ratio": cost_ratio,
    "tasks_solved": tasks_solved,
    "refetch_by_amount": refetch_by_amount,
    "cost_breakdown": cost_breakdown,
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
    d = Path(figures_dir)
    return {name: {fmt: d / f"{name}.{fmt}" for fmt in FIGURE_FORMATS} for name in FIGURES}


def write_figures(
    study: Study,
    inputs: Mapping[str, str | os.PathLike[str]] | Sequence | None = None,
    outputs: Sequence[str | os.PathLike[str]] | Mapping[str, str | os.PathLike[str]] | None = None,
    log: str | os.PathLike[str] | None = None,
) -> list[Path]:
    """Every figure of :data:`FIGURES` as PDF and PNG (or the ``outputs`` named ``{figure}.{fmt}``)."""
    import matplotlib

    from forgetting.tables import load_stats_tables

    if outputs is None:
        wanted = [p for f in figure_paths(Layout(study.results_dir).figures).values() for p in f.values()]
    else:
        wanted = [Path(p) for p in (outputs.values() if isinstance(outputs, Mapping) else outputs)]
    by_figure: dict[str, list[Path]] = {}
    for p in wanted:
        name = p.name.rsplit(".", 1)[0]
        if name not in BUILDERS:
            raise ValueError(f"{p}: not a figure of this pipeline ({', '.join(FIGURES)})")
        by_figure.setdefault(name, []).append(p)
    st = load_stats_tables(study, inputs)
    with StageLog(log) as out, matplotlib.rc_context(STYLE):
        for name, paths in by_figure.items():
            fig = BUILDERS[name](st)
            for p in paths:
                save_figure(fig, p)
            checkpoint("figures.figure")
            out.line(f"figure {name} → {', '.join(str(p) for p in paths)}")
    return wanted
