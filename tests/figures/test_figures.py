"""The figures, rendered to PNG from a small statistics set and measured.

The set has the paper's configurations at both timings, policies beyond the paper, a
configuration with a long free name, and missing numbers of every kind: an undefined CI, an
unbounded CI, an undefined estimate and an infinite ratio. Each figure must be a two-column
paper's text width at any number or length of configuration names, be mostly content, write
every missing number as missing (with a footnote) rather than as a bar of zero width, and never
join the policies beyond the paper (categories) with a line.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from PIL import Image

from forgetting.grid import PAPER_CONFIGURATIONS
from forgetting.report.figures import FIGURES, PNG_DPI, build_figure, save_figure
from forgetting.report.figures.layout import FIGURE_WIDTH_IN, LABEL_CHARS, LABEL_LINES
from forgetting.report.tables.build import StatsTables
from forgetting.study.statistics import StatsSettings
from forgetting_testkit.checkout import ROOT

LONG = "an-overlay-configuration-whose-free-name-is-much-longer-than-any-label-should-be"
#: configuration → its summary identity (the stats' _IDENTITY columns)
CONFIGURATIONS: dict[str, dict] = {
    "delayed-turn-reasoning-100": {"policy": "random", "scope": "reasoning", "granularity": "turn", "amount": 100.0,
                                   "timing": "delayed", "keep_last": 2},
    "delayed-turn-tool_output-50": {"policy": "random", "scope": "tool_output", "granularity": "turn",
                                    "amount": 50.0, "timing": "delayed", "keep_last": 2},
    "delayed-turn-tool_output-100": {"policy": "random", "scope": "tool_output", "granularity": "turn",
                                     "amount": 100.0, "timing": "delayed", "keep_last": 2},
    "delayed-token-tool_output-50": {"policy": "random", "scope": "tool_output", "granularity": "token",
                                     "amount": 50.0, "timing": "delayed", "keep_last": 2},
    "delayed-token-tool_output-75": {"policy": "random", "scope": "tool_output", "granularity": "token",
                                     "amount": 75.0, "timing": "delayed", "keep_last": 2},
    "immediate-turn-both-50": {"policy": "random", "scope": "both", "granularity": "turn", "amount": 50.0,
                               "timing": "immediate", "keep_last": 0},
    "immediate-turn-both-100": {"policy": "random", "scope": "both", "granularity": "turn", "amount": 100.0,
                                "timing": "immediate", "keep_last": 0},
    "keep8-turn-tool_output-100": {"policy": "random", "scope": "tool_output", "granularity": "turn",
                                   "amount": 100.0, "timing": None, "keep_last": 8},
    "batch4-delayed-turn-tool_output-100": {"policy": "batch", "scope": "tool_output", "granularity": "turn",
                                            "amount": 100.0, "timing": "delayed", "keep_last": 2},
    "gate10-delayed-turn-tool_output-100": {"policy": "gate", "scope": "tool_output", "granularity": "turn",
                                            "amount": 100.0, "timing": "delayed", "keep_last": 2},
    "reuse4-delayed": {"policy": "reuse", "scope": None, "granularity": None, "amount": None,
                       "timing": "delayed", "keep_last": 2},
    LONG: {"policy": "gate", "scope": "tool_output", "granularity": "token", "amount": 50.0,
           "timing": "delayed", "keep_last": 2},
}
BEYOND = ["keep8-turn-tool_output-100", "batch4-delayed-turn-tool_output-100",
          "gate10-delayed-turn-tool_output-100", "reuse4-delayed", LONG]
AGENTS = ("trae", "mini-text")  # the longest agent label
METRICS = {"tasks_solved": ("difference", 0.0), "cost_flat": ("ratio", 1.0), "cost_cache": ("ratio", 1.0),
           "refetch_rate": ("ratio", 1.0)}
#: (agent, configuration, metric) → (estimate, ci_low, ci_high): the missing numbers
MISSING = {
    ("trae", "delayed-token-tool_output-50", "cost_cache"): (1.4, math.nan, math.nan),  # no CI
    ("mini-text", "delayed-turn-tool_output-50", "tasks_solved"): (-1.0, math.nan, 0.5),  # no CI
    ("trae", "batch4-delayed-turn-tool_output-100", "refetch_rate"): (2.0, 1.2, math.inf),  # CI ∞
    ("mini-text", "reuse4-delayed", "refetch_rate"): (math.nan, math.nan, math.nan),  # n/a
    ("trae", "delayed-turn-tool_output-100", "refetch_rate"): (math.nan, math.nan, math.nan),  # n/a
    ("mini-text", "keep8-turn-tool_output-100", "cost_flat"): (math.inf, math.inf, math.inf),  # ∞
    ("trae", "delayed-token-tool_output-75", "refetch_rate"): (0.0, 0.0, 0.6),  # 0 on a log scale
}
#: per figure: the metrics it draws from the effects and the marks the set gives it
FIGURE_MARKS = {
    "cost_ratio": {"missing:no_ci": 1, "missing:infinite": 1},
    "tasks_solved": {"missing:no_ci": 1},
    "refetch_by_amount": {"missing:unbounded_ci": 1, "missing:no_estimate": 2, "missing:zero": 1},
    "cost_breakdown": {"missing:no_estimate": 1},
    "cache_validation": {"missing:no_estimate": 3},  # one configuration whose server reported nothing
}
#: the cache validation's profiles, and the configuration of an agent whose runs reported no cached tokens
PROFILES = ("paper", "vllm-blocks", "min-prefix")
UNREPORTED = ("trae", "immediate-turn-both-50")
COST = ("cost_cached", "cost_new", "cost_rebilled", "cost_cache_write", "cost_output")


def _effect(agent: str, name: str, metric: str, i: int, identity: dict) -> dict:
    kind, null = METRICS[metric]
    if (agent, name, metric) in MISSING:
        est, lo, hi = MISSING[(agent, name, metric)]
    else:
        est = (null + (i % 5 - 2) * 0.7) if kind == "difference" else 1.0 + 0.15 * (i % 7) + 0.05 * len(agent)
        lo, hi = est - 0.4 - 0.05 * (i % 3), est + 0.5
    return {"agent": agent, "configuration": name, **identity, "metric": metric, "kind": kind,
            "estimate": est, "ci_low": lo, "ci_high": hi, "null": null,
            "significant": None if math.isnan(lo) else bool(lo > null or hi < null)}


def _summary(agent: str, name: str, i: int, identity: dict | None) -> dict:
    identity = identity or dict.fromkeys(("policy", "scope", "granularity", "amount", "timing", "keep_last"))
    costs = dict(zip(COST, (0.5 + 0.02 * i, 0.1, 0.05 * i, 0.0, 0.3), strict=True))
    if (agent, name) == ("mini-text", "gate10-delayed-turn-tool_output-100"):
        costs["cost_rebilled"] = math.nan  # a component missing: the bar is n/a, not shorter
    # the baseline's cost on the row's tasks: its own total (0.9) but for a row on fewer tasks
    baseline_cost = 0.45 if (agent, name) == ("trae", "delayed-turn-tool_output-50") else 0.9
    return {"agent": agent, "configuration": name, **identity, "n_tasks": 10, "tasks_solved": 6.0 + i % 3,
            "model_backend": "synthetic", "baseline_cost": baseline_cost, **costs}


def _validation(agent: str, name: str, i: int, k: int) -> dict:
    """A cache validation row: the paper's lower bound above the server, the others near it."""
    reported = 0 if (agent, name) == UNREPORTED else 40
    gap = math.nan if not reported else (0.08 - 0.05 * k) + 0.002 * (i % 5) + 0.001
    return {"agent": agent, "configuration": name, "profile": PROFILES[k], "calls": 40, "reported_calls": reported,
            "estimate": gap, "ci_low": gap - 0.01, "ci_high": gap + 0.015}


def _stats(configurations: dict[str, dict]) -> StatsTables:
    names = ["baseline", *configurations]
    effects = {(a, n, m): _effect(a, n, m, i, configurations[n])
               for a in AGENTS for i, n in enumerate(names[1:]) for m in METRICS}
    summary = {(a, n): _summary(a, n, i, configurations.get(n)) for a in AGENTS for i, n in enumerate(names)}
    validation = {(a, n, p): _validation(a, n, i, k)
                  for a in AGENTS for i, n in enumerate(names) for k, p in enumerate(PROFILES)}
    return StatsTables(effects=effects, summary=summary, summary_order=list(summary), comparisons=[],
                       settings=StatsSettings.from_section(), provenance="SYNTHETIC DATA: a test's statistics.",
                       validation=validation)


@pytest.fixture(scope="module")
def stats() -> StatsTables:
    return _stats(CONFIGURATIONS)


#: the paper's study with the overlay of config/policies.yaml: 42 + 7 configurations
FULL_STUDY = {
    **{d.name: d.columns() for d in PAPER_CONFIGURATIONS},
    **{n: CONFIGURATIONS[n] for n in BEYOND[:4]},
    "keep4-turn-tool_output-100": {**CONFIGURATIONS["keep8-turn-tool_output-100"], "keep_last": 4},
    "keep16-turn-tool_output-100": {**CONFIGURATIONS["keep8-turn-tool_output-100"], "keep_last": 16},
    "mask10": {"policy": "mask", "scope": "tool_output", "granularity": "turn", "amount": 100.0, "timing": None,
               "keep_last": 10},
}


@pytest.fixture(scope="module")
def rendered(stats, tmp_path_factory):
    """figure name → (Figure, PNG path)."""
    out = tmp_path_factory.mktemp("figures")
    figures = {}
    for name in FIGURES:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # e.g. constrained layout giving up on collapsed axes
            fig = build_figure(name, stats)
            save_figure(fig, out / f"{name}.png")
            save_figure(fig, out / f"{name}.pdf")
        figures[name] = (fig, out / f"{name}.png")
    return figures


def _texts(fig, gid_prefix: str = "") -> list:
    from matplotlib.text import Text

    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text()
            and (t.get_gid() or "").startswith(gid_prefix)]


@pytest.mark.parametrize("name", FIGURES)
def test_a_figure_is_a_papers_text_width_and_mostly_content(rendered, name):
    """Today's bug: three 7 in panels side by side (21 in), and long names squeezing the plots
    into a strip over mostly white canvas."""
    fig, png = rendered[name]
    with Image.open(png) as im:
        width, height = im.size
        ink = np.asarray(im.convert("L")) < 245
    assert width == round(FIGURE_WIDTH_IN * PNG_DPI)  # 7 in: long names do not widen the canvas
    assert 2.5 * PNG_DPI <= height <= 9.0 * PNG_DPI  # fits a page with its caption
    # no white margins: ink reaches near every edge of the canvas
    rows, cols = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
    assert rows[0] < 0.03 * height and rows[-1] > 0.97 * height, (rows[0], rows[-1], height)
    assert cols[0] < 0.03 * width and cols[-1] > 0.97 * width, (cols[0], cols[-1], width)
    assert _content_share(fig, ink) > 0.75


def _content_share(fig, ink: np.ndarray) -> float:
    """The share of the canvas's 0.25 in tiles that hold ink or lie in a plot: white space
    outside the plots (margins, room left for labels drawn elsewhere) counts against it."""
    tile = PNG_DPI // 4
    height, width = ink.shape
    rows, cols = height // tile, width // tile
    content = ink[: rows * tile, : cols * tile].reshape(rows, tile, cols, tile).any(axis=(1, 3))
    for ax in fig.axes:
        box = ax.get_position()
        r0, r1 = int((1 - box.y1) * height) // tile, int((1 - box.y0) * height) // tile
        c0, c1 = int(box.x0 * width) // tile, int(box.x1 * width) // tile
        content[r0 : r1 + 1, c0 : c1 + 1] = True
    return float(content.mean())


@pytest.mark.parametrize("name", FIGURES)
def test_the_full_study_fits_a_page(name, tmp_path):
    """The paper's 42 configurations and the 7 of config/policies.yaml: still 7 in wide, at
    most a page's text height (9 in), every label on the canvas."""
    fig = build_figure(name, _stats(FULL_STUDY))
    save_figure(fig, tmp_path / "f.png")
    with Image.open(tmp_path / "f.png") as im:
        assert im.width == round(FIGURE_WIDTH_IN * PNG_DPI) and im.height <= 9.0 * PNG_DPI, im.size
        assert _content_share(fig, np.asarray(im.convert("L")) < 245) > 0.75
    _assert_on_canvas(fig)


def _assert_on_canvas(fig) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    drawn = fig.get_tightbbox(canvas.get_renderer())  # inches: everything drawn, labels included
    width, height = fig.get_size_inches()
    assert drawn.x0 >= -0.01 and drawn.y0 >= -0.01 and drawn.x1 <= width + 0.01 and drawn.y1 <= height + 0.01


@pytest.mark.parametrize("name", FIGURES)
def test_every_text_is_on_the_canvas_and_labels_are_short(rendered, name):
    fig, _ = rendered[name]
    _assert_on_canvas(fig)
    labels = [t.get_text() for ax in fig.axes for t in ax.get_yticklabels() if t.get_text()]
    assert all(len(label.split("\n")) <= LABEL_LINES for label in labels)
    assert all(len(line) <= LABEL_CHARS + 2 for label in labels for line in label.split("\n"))
    if name != "refetch_by_amount":  # it draws the amounts on x
        assert any(label.startswith("an-overlay-configuration") and label.endswith("…") for label in labels)


@pytest.mark.parametrize("name", FIGURES)
def test_missing_numbers_are_marked_and_footnoted(rendered, name):
    fig, _ = rendered[name]
    marks: dict[str, int] = {}
    for t in _texts(fig, "missing:"):
        marks[t.get_gid()] = marks.get(t.get_gid(), 0) + 1
    assert marks == FIGURE_MARKS[name]
    (footnote,) = _texts(fig, "footnote")
    text = footnote.get_text().replace("\n    ", " ")
    for gid, n in FIGURE_MARKS[name].items():
        mark = {"missing:no_ci": "no CI", "missing:unbounded_ci": "CI ∞", "missing:infinite": "∞",
                "missing:no_estimate": "n/a", "missing:zero": "0"}[gid]
        assert f"{mark} ({n}×): " in text


def test_a_missing_ci_draws_no_bar(rendered, stats):
    """Every error bar belongs to a complete estimate: a point whose CI is missing has none
    (today's bug: a bar of zero width, indistinguishable from a very precise estimate)."""
    complete = {m: 0 for m in ("cost_ratio", "tasks_solved")}
    for (_, _, metric), e in stats.effects.items():
        finite = all(math.isfinite(e[k]) for k in ("estimate", "ci_low", "ci_high"))
        if finite and metric in ("cost_flat", "cost_cache"):
            complete["cost_ratio"] += 1
        if finite and metric == "tasks_solved":
            complete["tasks_solved"] += 1
    for name, n in complete.items():
        fig, _ = rendered[name]
        bars = [c for ax in fig.axes for c in ax.containers if type(c).__name__ == "ErrorbarContainer"]
        segments = [seg for c in bars for lines in c.lines[2] for seg in lines.get_segments() if len(seg) == 2]
        lengths = [float(np.hypot(*(seg[1] - seg[0]))) for seg in segments]
        assert all(length > 0 for length in lengths), f"{name}: {lengths.count(0.0)} bars of zero length"
        assert len(segments) == n


def test_policies_beyond_the_paper_are_not_joined_by_lines(rendered):
    fig, _ = rendered["refetch_by_amount"]
    beyond = [ax for ax in fig.axes if (ax.get_title(loc="left") or ax.get_title()).endswith("beyond the paper")]
    paper = [ax for ax in fig.axes if ax not in beyond]
    assert len(beyond) == len(AGENTS)
    for ax in beyond:
        for line in ax.get_lines():
            if line.get_transform() != ax.transData:  # a reference line across the axes
                continue
            assert len(line.get_xdata()) <= 1 or line.get_linestyle() in ("None", "none", ""), line
        assert len(ax.get_yticks()) == len(BEYOND)  # a row per policy: categories, not amounts
    # the paper's configurations of one scope × granularity are joined along the amount axis
    joined = [line for ax in paper for line in ax.get_lines() if line.get_gid() == "amount-line"]
    assert joined and all(len(line.get_xdata()) >= 2 for line in joined)


def test_figures_are_byte_identical_when_drawn_again(rendered, stats, tmp_path):
    for name in FIGURES:
        _, png = rendered[name]
        fig = build_figure(name, stats)
        save_figure(fig, tmp_path / f"{name}.png")
        save_figure(fig, tmp_path / f"{name}.pdf")
        assert (tmp_path / f"{name}.png").read_bytes() == png.read_bytes()
        assert (tmp_path / f"{name}.pdf").read_bytes() == png.with_suffix(".pdf").read_bytes()


@pytest.mark.parametrize("name", FIGURES)
def test_a_study_of_baselines_only_says_so(name):
    st = _stats({})
    fig = build_figure(name, st)
    assert any(t.get_text() == "no configurations" for t in _texts(fig))
    _assert_on_canvas(fig)


@pytest.mark.parametrize("name", FIGURES)
def test_the_report_caption_explains_the_marks(name):
    caption = (ROOT / "workflow" / "report" / f"figure_{name}.rst").read_text()
    assert "n/a" in caption and "footnote" in caption


def test_the_cost_breakdown_divides_by_the_baselines_cost_on_the_rows_tasks(rendered, stats):
    """A row on fewer tasks is compared with the baseline on those tasks (summary.baseline_cost),
    as in the cost breakdown table, not with the baseline's total over all its tasks."""
    from matplotlib.patches import Rectangle

    fig, _ = rendered["cost_breakdown"]
    ends = {round(p.get_x() + p.get_width(), 4) for ax in fig.axes for p in ax.patches
            if isinstance(p, Rectangle) and p.get_width() > 0}
    total = sum(stats.summary[("trae", "delayed-turn-tool_output-50")][c] for c in COST)
    assert round(total / 0.45, 4) in ends  # trae's row: its baseline's cost on its tasks is 0.45
    assert round(total / 0.9, 4) in ends  # mini-text's same row: the baseline's 0.9


def test_the_cache_validation_draws_each_profiles_gap_and_counts_what_was_not_reported(rendered, stats):
    """One marker series per profile; a configuration whose server reported no cached tokens is
    n/a in every series and footnoted with that reason — never a point at 0."""
    fig, _ = rendered["cache_validation"]
    legend = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    assert legend == [*PROFILES, "grey rows: tool output scope"]
    bars = [c for ax in fig.axes for c in ax.containers if type(c).__name__ == "ErrorbarContainer"]
    drawn = sum(1 for v in stats.validation.values() if v["reported_calls"] and (v["agent"], v["configuration"]) in
                {(a, n) for a in AGENTS for n in ["baseline", *CONFIGURATIONS]})
    assert len(bars) == drawn == len(stats.validation) - len(PROFILES)
    xs = [float(c.lines[0].get_xdata()[0]) for c in bars]
    assert all(abs(x) > 0 for x in xs)  # the test's gaps are never 0: an n/a drew no point there
    (footnote,) = _texts(fig, "footnote")
    assert "3 point(s) n/a: no call of those runs reported cached tokens" in footnote.get_text().replace("\n    ", " ")


def _panels_by_section(fig) -> dict[str, list]:
    """Panels by the section of their title (``agent · section``), in agent order."""
    out: dict[str, list] = {}
    for ax in fig.axes:
        title = ax.get_title(loc="left")
        if " · " in title:
            out.setdefault(title.split(" · ", 1)[1], []).append(ax)
    return out


@pytest.mark.parametrize("name", FIGURES)
def test_the_agents_panels_share_their_value_axis(rendered, name):
    """Issue 27, item 8: the two agents' panels side by side read on one scale (today each
    agent's column had its own x range)."""
    fig, _ = rendered[name]
    for section, panels in _panels_by_section(fig).items():
        assert len(panels) == len(AGENTS)
        amounts = name == "refetch_by_amount" and section != "beyond the paper"
        limits = [ax.get_ylim() if amounts else ax.get_xlim() for ax in panels]
        assert all(lim == pytest.approx(limits[0]) for lim in limits), (section, limits)


@pytest.mark.parametrize("name", FIGURES)
def test_the_grey_row_band_has_a_legend_entry(rendered, name):
    from matplotlib.patches import Patch

    fig, _ = rendered[name]
    banded = {p.get_gid() for ax in fig.axes for p in ax.patches if str(p.get_gid() or "").startswith("scope-band:")}
    entries = [(t.get_text(), h) for leg in fig.legends for t, h in zip(leg.get_texts(), leg.legend_handles,
                                                                        strict=True)]
    band = [(text, h) for text, h in entries if text.startswith("grey rows")]
    if name == "refetch_by_amount":  # lines by amount: no rows to band
        assert not banded and not band
        return
    assert banded == {"scope-band:tool_output"}
    assert [text for text, _ in band] == ["grey rows: tool output scope"] and isinstance(band[0][1], Patch)


@pytest.mark.parametrize("name", [n for n in FIGURES if n != "refetch_by_amount"])
def test_a_wrapped_label_sits_at_its_marker(rendered, name):
    """A two-line row label is centred on its row (today it hung below the marker: its first
    line's baseline sat on the row)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig, _ = rendered[name]
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    wrapped = 0
    for ax in fig.axes:
        for t in ax.yaxis.get_major_ticks():
            label, tick = t.label1, t.get_loc()
            if not label.get_visible() or "\n" not in label.get_text():
                continue
            wrapped += 1
            box = label.get_window_extent(renderer)
            row_y = ax.transData.transform((0.0, tick))[1]
            assert abs((box.y0 + box.y1) / 2 - row_y) < 1.5, (label.get_text(), box, row_y)
    assert wrapped


def test_an_unbounded_ci_draws_what_it_can_and_says_why(rendered):
    """The re-fetch figure's CI ∞ (2.0 [1.2, ∞], trae's batched policy): the bar to 1.2, an
    arrow off the axis for the infinite bound, and a footnote that says why it is infinite."""
    fig, _ = rendered["refetch_by_amount"]
    (ax,) = [a for a in fig.axes if a.get_title(loc="left") == "Trae agent · beyond the paper"]
    bars = [c for c in ax.containers if type(c).__name__ == "ErrorbarContainer"]
    segments = [seg for c in bars for lines in c.lines[2] for seg in lines.get_segments()]
    assert any(seg[0][0] == pytest.approx(1.2) and seg[1][0] == pytest.approx(2.0) for seg in segments), segments
    arrows = [t for t in ax.texts if t.get_gid() == "unbounded-ci-arrow"]
    assert len(arrows) == 1 and arrows[0].xy[0] == 1.0  # to the value axis' far end
    (footnote,) = _texts(fig, "footnote")
    assert "the baseline's value is 0 in more resamples than the interval's tail holds" in footnote.get_text(
    ).replace("\n    ", " ")


def test_intervals_on_fewer_resamples_are_counted_in_the_footnote(stats):
    import dataclasses

    key = ("trae", "delayed-turn-reasoning-100", "refetch_rate")
    effects = {**stats.effects, key: {**stats.effects[key], "n_undefined": 3489}}
    fig = build_figure("refetch_by_amount", dataclasses.replace(stats, effects=effects))
    (footnote,) = _texts(fig, "footnote")
    text = footnote.get_text().replace("\n    ", " ")
    assert "1 interval rests on fewer than all 10000 resamples" in text and "the fewest: 6511" in text
    (plain,) = _texts(build_figure("refetch_by_amount", stats), "footnote")
    assert "fewer than all" not in plain.get_text()
