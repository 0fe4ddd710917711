"""The figures' page layout: a fixed width, configurations as labelled rows, footnotes.

Every figure is :data:`FIGURE_WIDTH_IN` wide (the text width of a two-column paper, so it is
legible printed at that size: 7–9 pt text) and only as high as its rows need. A grid of
panels has one column per agent and one row per :class:`Section` (the paper's configurations
at each timing, then the policies beyond the paper); within a panel each configuration is a
row with a horizontal label on the left (:func:`row_label`: short, wrapped to
:data:`LABEL_LINES` lines of :data:`LABEL_CHARS` characters, so a long configuration name
cannot widen the canvas or squeeze the plots; the tables carry the full names).
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from forgetting.deletion.names import SCOPE_LABELS, configuration_label, is_paper_like, policy_label
from forgetting.report.figures.marks import MissingMarks
from forgetting.report.stats.labels import SCOPE_ORDER, TIMING_ORDER, agent_label, configuration_key
from forgetting.report.tables.build import StatsTables

#: inches: a two-column paper's text width (IEEE, ACM: 7.0–7.1 in)
FIGURE_WIDTH_IN = 7.0
LABEL_CHARS = 30
LABEL_LINES = 2
#: inches per configuration row: a fixed gap plus one label line (7 pt type: ~10 pt leading),
#: so that the paper's 42 configurations and a few more fit a page's text height
ROW_GAP_IN, ROW_LINE_IN = 0.03, 0.1
TITLE_LINE_IN = 0.17
LEGEND_IN = 0.3
FOOTNOTE_LINE_IN = 0.13
FOOTNOTE_CHARS = 135


@dataclass(frozen=True)
class Section:
    """One row of panels: ``key`` a timing of the paper's policy or ``other``; its
    configuration rows top to bottom, each as high as its label's lines."""

    key: str
    title: str
    rows: list[dict[str, Any]] = field(default_factory=list)  # one summary row per configuration

    @cached_property
    def labels(self) -> list[str]:
        return [row_label(r) for r in self.rows]

    @cached_property
    def spans(self) -> list[float]:
        """Each row's height, in rows of one label line."""
        return [
            (ROW_GAP_IN + ROW_LINE_IN * (label.count("\n") + 1)) / (ROW_GAP_IN + ROW_LINE_IN) for label in self.labels
        ]

    def top(self, i: int) -> float:
        """The upper edge of row ``i`` (``len(rows)``: the lower edge of the last)."""
        return sum(self.spans[:i])

    @cached_property
    def positions(self) -> list[float]:
        """Each row's centre on the y axis (0 at the top edge, growing downwards)."""
        return [self.top(i) + h / 2 for i, h in enumerate(self.spans)]

    @property
    def height_in(self) -> float:
        return self.top(len(self.rows)) * (ROW_GAP_IN + ROW_LINE_IN)


def _section_key(r: Mapping[str, Any]) -> str:
    return str(r["timing"]) if is_paper_like(r) else "other"


def section_title(key: str) -> str:
    return "beyond the paper" if key == "other" else key


def row_label(r: Mapping[str, Any]) -> str:
    """A configuration's label on a figure: ``tool output · turn · 50 %`` for the paper's
    policy, the policy's short label otherwise (``batched ×4 · delayed``), else its name;
    wrapped to :data:`LABEL_LINES` lines of :data:`LABEL_CHARS` characters (``…`` beyond)."""
    name = str(r["configuration"])
    text = configuration_label(name, r) if is_paper_like(r) else policy_label(name, r)
    lines = textwrap.wrap(text, LABEL_CHARS, max_lines=LABEL_LINES, placeholder=" …") or [""]
    return "\n".join(lines)


def sections_of(st: StatsTables, *, with_baseline: bool = False) -> list[Section]:
    """The sections of ``st``'s evaluations in table order, each with every configuration any
    agent has (``with_baseline``: a baseline row first in the first)."""
    by_key: dict[str, dict[str, dict[str, Any]]] = {}
    for r in st.evaluations():
        by_key.setdefault(_section_key(r), {}).setdefault(str(r["configuration"]), r)
    out = []
    for key in (*TIMING_ORDER, "other"):
        if key not in by_key:
            continue
        rows = sorted(by_key[key].values(), key=lambda r: configuration_key(str(r["configuration"]), r))
        if with_baseline and not out:
            rows.insert(0, {"configuration": "baseline"})
        out.append(Section(key, section_title(key), rows))
    return out or [Section("delayed", "delayed")]


def forest(
    st: StatsTables,
    sections: Sequence[Section],
    *,
    xlabel: str,
    plot_height_in: Mapping[str, float] | None = None,
    share_x: bool = True,
) -> tuple[Any, list[list[Any]]]:
    """A :data:`FIGURE_WIDTH_IN`-wide figure with a panel per section (rows) and agent
    (columns): ``axes[section][agent]``. Sections named in ``plot_height_in`` get panels of
    that height for the caller to draw freely; the others are configuration rows (y =
    :attr:`Section.positions`, top to bottom, labelled in the first column) with a value
    axis ``xlabel``."""
    from matplotlib.figure import Figure

    free = dict(plot_height_in or {})
    agents = st.agents or [""]
    heights = [free.get(s.key) or max(0.3, s.height_in) for s in sections]
    # per section: the panel title and padding; x ticks and label under every row of free
    # panels, under the last one only when the value axis is shared
    decorations = sum(0.28 + (0.34 if (s.key in free or not share_x) else 0.0) for s in sections)
    height = sum(heights) + decorations + (0.34 if share_x else 0.0)
    fig = Figure(figsize=(FIGURE_WIDTH_IN, height), layout="constrained")
    # one value axis for every panel, so the agents' panels side by side read on one scale
    grid = fig.subplots(
        len(sections),
        len(agents),
        squeeze=False,
        sharex="all" if share_x else False,
        gridspec_kw={"height_ratios": heights},
    )
    axes = [list(row) for row in grid]
    last = len(sections) - 1
    for si, section in enumerate(sections):
        for ai, agent in enumerate(agents):
            ax = axes[si][ai]
            ax.set_title(f"{agent_label(agent)} · {section.title}", loc="left")
            if not section.rows:
                ax.text(0.5, 0.5, "no configurations", ha="center", va="center", transform=ax.transAxes)
            if section.key in free:
                continue
            n = len(section.rows)
            ax.set_yticks(section.positions, section.labels if ai == 0 else [""] * n)
            # a wrapped label centred on its row (matplotlib's default, center_baseline, puts the
            # first line's baseline there, so a two-line label hangs below its marker)
            for label in ax.get_yticklabels():
                label.set_verticalalignment("center")
            ax.tick_params(axis="y", length=0, labelleft=ai == 0)
            ax.set_ylim(section.top(n) if n else 1.0, 0.0)
            ax.grid(axis="x", color="#dddddd", lw=0.6)
            ax.set_axisbelow(True)
            if share_x and si != last:
                ax.tick_params(axis="x", labelbottom=False)
            else:
                ax.set_xlabel(xlabel)
    return fig, axes


def scope_bands(ax: Any, section: Section) -> None:
    """Shade every other scope's band of rows in a section of the paper's configurations."""
    if section.key == "other":
        return
    rows = section.rows
    start = 0
    for i in range(1, len(rows) + 1):
        if i == len(rows) or rows[i].get("scope") != rows[start].get("scope"):
            scope = rows[start].get("scope")
            if scope in SCOPE_ORDER and SCOPE_ORDER.index(scope) % 2 == 1:
                ax.axhspan(section.top(start), section.top(i), gid=f"scope-band:{scope}", **BAND)
            start = i


#: the grey band behind every other scope's rows
BAND = {"color": "#000000", "alpha": 0.05, "lw": 0}


def band_handles(fig: Any) -> list[Any]:
    """Legend entries for the scope bands the figure drew (one per banded scope): a reader
    otherwise cannot tell what the grey rows mean."""
    from matplotlib.patches import Patch

    banded = sorted(
        {str(p.get_gid()).split(":", 1)[1] for ax in fig.axes for p in ax.patches
         if str(p.get_gid() or "").startswith("scope-band:")},
        key=SCOPE_ORDER.index,
    )
    return [
        Patch(facecolor=BAND["color"], alpha=0.12, edgecolor="none",
              label=f"grey rows: {SCOPE_LABELS.get(scope, scope)} scope", gid="scope-band-legend")
        for scope in banded
    ]


def finish_figure(
    fig: Any,
    title: str,
    st: StatsTables,
    handles: Sequence[Any],
    marks: MissingMarks,
    *,
    subtitle: str = "",
    notes: Sequence[str] = (),
) -> None:
    """Title (with the provenance line), a legend under the panels and, when a number is
    missing, a footnote that explains each mark (then the figure's own ``notes``); the figure
    grows by what they need."""
    lines = [textwrap.fill(t, 110) for t in (title, subtitle, st.provenance) if t]
    fig.suptitle("\n".join(lines), fontsize=9)
    handles = [*handles, *band_handles(fig)]
    notes = [textwrap.fill(n, FOOTNOTE_CHARS, subsequent_indent="    ") for n in [*marks.footnote(), *notes]]
    note_lines = sum(n.count("\n") + 1 for n in notes)
    width, height = fig.get_size_inches()
    foot = note_lines * FOOTNOTE_LINE_IN + (0.08 if notes else 0.0)
    legend = LEGEND_IN if handles else 0.0
    height += sum(t.count("\n") + 1 for t in lines) * TITLE_LINE_IN + legend + foot
    fig.set_size_inches(width, height)
    # the panels and the title above the legend and the footnote
    fig.get_layout_engine().set(rect=(0.0, (legend + foot) / height, 1.0, 1.0 - (legend + foot) / height))
    if handles:
        fig.legend(
            handles=handles,
            loc="lower center",
            bbox_to_anchor=(0.5, foot / height),
            ncols=min(len(handles), 6),
            frameon=False,
            borderaxespad=0.2,
        )
    if notes:
        fig.text(0.012, 0.04 / height, "\n".join(notes), ha="left", va="bottom", fontsize=7, gid="footnote")
