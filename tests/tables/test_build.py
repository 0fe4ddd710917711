"""Table building and rendering: Holm decisions beside raw marks, formats, escaping."""

from __future__ import annotations

import csv
import io

import pyarrow as pa
import pytest

from forgetting.grid import paper_configuration
from forgetting.report.stats.schemas import COMPARISONS_SCHEMA, EFFECTS_SCHEMA, SUMMARY_SCHEMA
from forgetting.report.tables import format as fmt
from forgetting.report.tables.build import StatsTables, table1, table2
from forgetting.report.tables.writers import latex_escape, to_csv, to_html, to_latex, to_markdown
from forgetting.study.statistics import StatsSettings

CONFS = ["delayed-turn-reasoning-25", "delayed-turn-reasoning-50", "delayed-turn-reasoning-75"]
# per configuration: (flat ratio, CI, p, raw significant), (caching-aware ...)
FLAT = [(0.80, 0.70, 0.90, 0.015, True), (1.20, 1.01, 1.40, 0.04, True), (1.10, 1.02, 1.20, 0.03, True)]
CACHE = [(1.30, 1.10, 1.50, 0.001, True), (1.25, 1.08, 1.40, 0.002, True), (1.02, 0.90, 1.15, 0.5, False)]


def _dims(name: str) -> dict:
    return paper_configuration(name).columns()


def _effect(conf: str, metric: str, est, lo, hi, p, sig) -> dict:
    row = {k: None for k in EFFECTS_SCHEMA.names}
    row.update(
        agent="mini",
        configuration=conf,
        **_dims(conf),
        metric=metric,
        kind="ratio",
        value=1.0,
        reference=1.0,
        estimate=est,
        ci_low=lo,
        ci_high=hi,
        null=1.0,
        p_value=p,
        significant=sig,
        n_tasks=100,
        n_undefined=0,
    )
    return row


def stats_tables(holm_family: str = "column") -> StatsTables:
    effects = []
    for conf, flat, cache in zip(CONFS, FLAT, CACHE, strict=True):
        effects.append(_effect(conf, "cost_flat", *flat))
        effects.append(_effect(conf, "cost_cache", *cache))
        e = _effect(conf, "tasks_solved", -2.4, -6.0, 1.2, 0.2, False)
        effects.append({**e, "kind": "difference", "null": 0.0})
        effects.append(_effect(conf, "turns", 1.73, 1.51, 1.98, 0.0002, True))
    summary = []
    for conf, solved in (("baseline", 74.6), *zip(CONFS, (72.0, 70.0, 71.0), strict=True)):
        row = {k: None for k in SUMMARY_SCHEMA.names}
        dims = _dims(conf) if conf != "baseline" else {"policy": "none", "keep_last": 0}
        row.update(
            agent="mini",
            configuration=conf,
            **dims,
            n_runs=500 if conf == "baseline" else 100,
            n_missing=0,
            n_tasks=100,
            repeats=5 if conf == "baseline" else 1,
            tasks_solved=solved,
            median_turns=41.0,
            capped=4.2 if conf == "baseline" else 3,
            looping=0.0,
        )
        summary.append(row)
    return StatsTables.from_tables(
        pa.Table.from_pylist(effects, schema=EFFECTS_SCHEMA),
        COMPARISONS_SCHEMA.empty_table(),
        pa.Table.from_pylist(summary, schema=SUMMARY_SCHEMA),
        StatsSettings.from_section({"resamples": 10_000, "seed": 1, "holm_family": holm_family}),
    )


def _csv(table) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(to_csv(table))))


def test_table2_marks_raw_and_holm_decisions_per_column_family():
    t = table2(stats_tables("column"))
    assert [r["flat"] for r in t.rows] == ["0.80 [0.70, 0.90]*†", "1.20 [1.01, 1.40]*", "1.10 [1.02, 1.20]*"]
    assert [r["cache"] for r in t.rows] == ["1.30 [1.10, 1.50]*†", "1.25 [1.08, 1.40]*†", "1.02 [0.90, 1.15]"]
    rows = _csv(t)
    # flat family (m = 3): 0.015·3 = 0.045, 0.03·2 = 0.06, max(0.04·1, 0.06) = 0.06
    assert [float(r["cost_flat_ratio_p_holm"]) for r in rows] == pytest.approx([0.045, 0.06, 0.06])
    assert [r["cost_flat_ratio_significant_holm"] for r in rows] == ["true", "false", "false"]
    # caching-aware family: 0.003, 0.004, 0.5; the third has no raw significance either
    assert [float(r["cost_cache_ratio_p_holm"]) for r in rows] == pytest.approx([0.003, 0.004, 0.5])
    assert [r["cost_cache_ratio_significant"] for r in rows] == ["true", "true", "false"]


def test_table_family_holm_is_stricter():
    t = table2(stats_tables("table"))
    # one family of the six tests: 0.001·6, 0.002·5, 0.015·4 = 0.06 > 0.05 → the flat saving loses †
    assert [r["flat"] for r in t.rows] == ["0.80 [0.70, 0.90]*", "1.20 [1.01, 1.40]*", "1.10 [1.02, 1.20]*"]
    assert [r["cache"] for r in t.rows][:2] == ["1.30 [1.10, 1.50]*†", "1.25 [1.08, 1.40]*†"]
    assert float(_csv(t)[0]["cost_flat_ratio_p_holm"]) == pytest.approx(0.06)


def test_table1_shows_the_baseline_and_formats_counts_and_changes():
    t = table1(stats_tables())
    base, first = t.rows[0], t.rows[1]
    assert (base["timing"], base["solved"], base["delta"], base["capped"]) == ("baseline", "74.6", "", "4.2")
    assert first["delta"] == "-2.4 [-6.0, +1.2]"
    assert first["change"].startswith("+73 % [+51, +98]*")
    assert (first["scope"], first["granularity"], first["amount"]) == ("reasoning", "turn", "25")


def test_renderings():
    t = table2(stats_tables())
    md = to_markdown(t)
    assert md.splitlines()[2].startswith("| Agent | Timing |") and "\\*†" in md
    assert all(not line.startswith("* ") for line in md.splitlines())  # a note is no list item
    tex = to_latex(t)
    assert r"\begin{tabular}{llllrrrrrr}" in tex and r"\textsuperscript{*}\textsuperscript{\dag}" in tex
    assert "_" not in tex.replace(r"\_", "")  # every underscore escaped
    html = to_html(t)
    assert html.startswith("<!DOCTYPE html>") and '<td class="r">0.80 [0.70, 0.90]*†</td>' in html
    assert to_csv(t) == to_csv(table2(stats_tables()))


def test_number_formatting():
    assert fmt.number(-0.0001, 2) == "0.00" and fmt.number(1.005, 1, signed=True) == "+1.0"
    assert fmt.number(float("nan")) == fmt.NA and fmt.number(float("inf")) == "∞"
    assert fmt.count(3.0) == "3" and fmt.count(4.2) == "4.2"
    assert fmt.percent_change(0.9, 0.8, 1.05) == "-10 % [-20, +5]"
    assert (
        fmt.csv_cell(True) == "true"
        and fmt.csv_cell(float("nan")) == ""
        and fmt.csv_cell(1 / 3) == "0.333333"
    )
    assert latex_escape("tool_output 50 % & #1") == r"tool\_output 50 \% \& \#1"
