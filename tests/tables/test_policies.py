"""Policies beyond the paper in the statistics, tables, figures and ``report --print``, on a small
synthetic study (forgetting_testkit.effects) that mixes them with the paper's configurations."""

from __future__ import annotations

import csv
import io

import pytest

from forgetting.foundation.layout import Layout
from forgetting.records.schemas import read_dataset
from forgetting.report.collect import collect
from forgetting.report.figures import FIGURES, write_figures
from forgetting.report.stats.run import write_stats
from forgetting.report.stats.schemas import STATS
from forgetting.report.tables import load_stats_tables, render_table, write_tables
from forgetting.report.tables.build import BUILDERS, policies_comparison
from forgetting.report.tables.writers import to_csv
from forgetting_testkit.stats_study import make_study

PAPER = ["delayed-turn-tool_output-50", "delayed-token-tool_output-50", "immediate-turn-tool_output-50"]
BEYOND = [
    "keep8-turn-tool_output-100",
    "batch4-delayed-turn-tool_output-100",
    "batch4-immediate-turn-tool_output-100",  # would pair with batch4-delayed by timing: must not
    "gate10-delayed-turn-tool_output-100",
    "reuse4-delayed",
    "mask10",
]
#: table order: the paper's, then policy (random, batch, gate, reuse, mask), retention delay
ORDER = [
    "keep8-turn-tool_output-100",
    "batch4-immediate-turn-tool_output-100",
    "batch4-delayed-turn-tool_output-100",
    "gate10-delayed-turn-tool_output-100",
    "reuse4-delayed",
    "mask10",
]
LABELS = {
    "keep8-turn-tool_output-100": "keep 8",
    "batch4-immediate-turn-tool_output-100": "batched ×4 · immediate",
    "batch4-delayed-turn-tool_output-100": "batched ×4 · delayed",
    "gate10-delayed-turn-tool_output-100": "cache gate, 10 calls · delayed",
    "reuse4-delayed": "reuse-aware, stale after 4 · delayed",
    "mask10": "masking, last 10",
}


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("policies")
    s = make_study(tmp, n_tasks=8, configurations=PAPER + BEYOND, statistics={"resamples": 400})
    collect(s)
    write_stats(s)
    write_tables(s)
    return s


def _rows(study, table: str) -> list[dict[str, str]]:
    text = (Layout(study.results_dir).tables / f"{table}.csv").read_text()
    return list(csv.DictReader(io.StringIO(text)))


def test_policies_are_evaluations_but_are_never_paired(study):
    st = load_stats_tables(study)
    for agent in study.agents:
        for name in PAPER + BEYOND:
            assert (agent, name, "cost_cache") in st.effects and (agent, name) in st.summary
    pairs = {(c["agent"], c["comparison"], c["first"], c["second"]) for c in st.comparisons}
    assert pairs == {
        (a, kind, first, second)
        for a in study.agents
        for kind, first, second in (
            ("timing", "delayed-turn-tool_output-50", "immediate-turn-tool_output-50"),
            ("granularity", "delayed-turn-tool_output-50", "delayed-token-tool_output-50"),
        )
    }
    effects = read_dataset(Layout(study.results_dir).stats / "effects.parquet", STATS["effects"])
    row = next(r for r in effects.to_pylist() if r["configuration"] == "reuse4-delayed")
    assert (row["policy"], row["scope"], row["amount"], row["keep_last"]) == ("reuse", "tool_output", None, 2)


def test_every_table_lists_the_policies_with_their_labels(study):
    for agent in ("trae", "mini"):
        rows = [r for r in _rows(study, "table1") if r["agent"] == agent]
        assert [r["configuration"] for r in rows] == ["baseline", *PAPER, *ORDER]
        for table in ("refetch", "cost_breakdown"):
            names = [r["configuration"] for r in _rows(study, table) if r["agent"] == agent]
            assert names == ["baseline", *PAPER, *ORDER], table
    # Table II: delayed and other delays; its immediate part: the immediate ones
    t2 = {r["configuration"] for r in _rows(study, "table2")}
    t2i = {r["configuration"] for r in _rows(study, "table2_immediate")}
    assert t2 == set(PAPER[:2]) | set(BEYOND) - {"batch4-immediate-turn-tool_output-100"}
    assert t2i == {"immediate-turn-tool_output-50", "batch4-immediate-turn-tool_output-100"}
    md = (Layout(study.results_dir).tables / "table1.md").read_text()
    for name, label in LABELS.items():
        assert f"| Trae agent | {label} |" in md, name
    assert "| Trae agent | delayed | tool output | turn | 50 |" in md
    assert "show their policy in the Timing column" in md


def test_policies_comparison_against_the_papers_delayed_configurations(study):
    st = load_stats_tables(study)
    t = policies_comparison(st)
    data = list(csv.DictReader(io.StringIO(to_csv(t))))
    for agent in study.agents:
        rows = [r for r in data if r["agent"] == agent]
        assert [(r["kind"], r["configuration"]) for r in rows] == [
            ("baseline", "baseline"),
            ("paper", "delayed-turn-tool_output-50"),
            ("paper", "delayed-token-tool_output-50"),
            *[("policy", n) for n in ORDER],
        ]
        for r in rows[1:]:
            solved = st.effects[(agent, r["configuration"], "tasks_solved")]
            cache = st.effects[(agent, r["configuration"], "cost_cache")]
            assert float(r["delta_solved"]) == pytest.approx(solved["estimate"], rel=1e-5)
            assert float(r["cost_cache_ratio"]) == pytest.approx(cache["estimate"], rel=1e-5)
            assert (
                float(r["cost_cache_ratio_ci_low"])
                <= float(r["cost_cache_ratio"])
                <= float(r["cost_cache_ratio_ci_high"])
            )
            assert r["delta_solved_p_holm"] != ""
            s = st.summary[(agent, r["configuration"])]
            total = sum(s[c] for c in ("cost_cached", "cost_new", "cost_rebilled", "cost_cache_write", "cost_output"))
            assert float(r["rebilled_share"]) == pytest.approx(s["cost_rebilled"] / total, rel=1e-5)
    shown = {r["configuration"]: r for r in t.rows}
    assert shown["batch4-delayed-turn-tool_output-100"]["policy"] == "batched ×4 · delayed"
    assert shown["delayed-turn-tool_output-50"]["policy"] == "delayed"
    assert shown["baseline"]["delta"] == "" and shown["baseline"]["solved"] != ""
    # the synthetic generator re-bills less when rewriting in batches or behind the gate
    for agent in study.agents:
        share = {r["configuration"]: float(r["rebilled_share"]) for r in data if r["agent"] == agent}
        assert share["batch4-delayed-turn-tool_output-100"] < share["keep8-turn-tool_output-100"]
        assert share["baseline"] == 0.0


def test_every_format_is_written_and_printed(study, run_cli):
    layout = Layout(study.results_dir)
    for fmt in ("csv", "md", "tex", "html"):
        assert (layout.tables / f"policies_comparison.{fmt}").stat().st_size > 0
    tex = (layout.tables / "policies_comparison.tex").read_text()
    assert r"batched $\times$4 $\cdot$ delayed" in tex and r"$\Delta$ solved" in tex
    assert set(BUILDERS) >= {"policies_comparison"}
    printed = render_table(study, "policies_comparison")
    assert printed == (layout.tables / "policies_comparison.md").read_text()
    proc = run_cli("report", study.source, "--print", "policies_comparison")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == printed.strip()  # no step ran: only the table
    bad = run_cli("report", study.source, "--print", "table9")
    assert bad.returncode == 2 and "--print: 'table9' is not a table; choose from: table1" in bad.stderr


def test_a_study_without_policies_says_so(tmp_path):
    s = make_study(tmp_path, n_tasks=4, configurations=PAPER[:1], statistics={"resamples": 100})
    collect(s)
    write_stats(s)
    t = policies_comparison(load_stats_tables(s))
    assert [r["configuration"] for r in t.rows] == ["baseline", PAPER[0]] * 2
    assert any("no configuration beyond the paper's 42" in n for n in t.notes)


@pytest.mark.slow
def test_figures_draw_policies_in_their_own_panel(study):
    paths = write_figures(study)
    assert len(paths) == 2 * len(FIGURES) and all(p.stat().st_size > 1000 for p in paths)
