"""Tables from declarations (issue 16, item 4): one column spec yields both the display view
(Markdown, LaTeX, HTML) and the data view (CSV), and the tables the pipeline writes are such specs."""

from __future__ import annotations

import csv
import io

import pyarrow as pa
import pytest

from forgetting.records.schemas import RUN_COSTS_SCHEMA
from forgetting.report.stats.run import compute_statistics
from forgetting.report.tables import format as fmt
from forgetting.report.tables.build import BUILDERS, StatsTables
from forgetting.report.tables.columns import Column, Estimate, Spec
from forgetting.report.tables.writers import to_csv, to_latex, to_markdown
from forgetting.study.statistics import StatsSettings
from forgetting_testkit.hand_study import runs_table, tool_calls_table

SETTINGS = StatsSettings.from_section({"resamples": 200, "seed": 1, "confidence": 0.9})
SPEC = Spec(
    "demo_spec",
    "A declared table",
    columns=(
        Column("name", "Name", data="configuration", show=str.upper),
        Column(data="n_tasks"),  # written, not shown
        Column("runs", "Runs", cell=lambda r: f"{r['n_runs']} runs", align="r"),  # shown, not written
        Estimate("cost", "Cost", "cost", data="cost_ratio", ci=True),
        Estimate("gap", "Gap", "gap", data="gap", digits=1, signed=True, tested=False, baseline="gap_own"),
    ),
    group=lambda r: "baseline" if r["configuration"] == "baseline" else "evaluations",
)
ROWS = [
    {"configuration": "baseline", "n_tasks": 4, "n_runs": 8, "gap_own": 1.25},
    {"configuration": "a", "n_tasks": 4, "n_runs": 4},
    {"configuration": "b", "n_tasks": 3, "n_runs": 3},
    {"configuration": "c", "n_tasks": 4, "n_runs": 4},
]


def _effect(estimate: float, p: float, significant: bool) -> dict:
    return {"estimate": estimate, "ci_low": estimate - 0.1, "ci_high": estimate + 0.1,
            "p_value": p, "significant": significant}


EFFECTS = {
    ("a", "cost"): _effect(0.5, 0.01, True),
    ("b", "cost"): _effect(0.9, 0.04, True),
    ("a", "gap"): _effect(-2.0, 0.3, False),
    # c has no effects at all
}


def _fill():
    return SPEC.fill(ROWS, SETTINGS, lambda r, metric: EFFECTS.get((r["configuration"], metric)))


def _csv(table) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(to_csv(table))))


def test_one_declaration_yields_the_shown_and_the_written_columns_in_its_order():
    t, _ = _fill()
    assert [h.header for h in t.columns] == ["Name", "Runs", "Cost [90 % CI]", "Gap"]
    assert r"Cost [90\,\% CI]" in to_latex(t)
    assert to_markdown(t).splitlines()[2] == "| Name | Runs | Cost [90 % CI] | Gap |"
    assert to_csv(t).splitlines()[0] == ",".join([
        "configuration", "n_tasks",
        "cost_ratio", "cost_ratio_ci_low", "cost_ratio_ci_high", "cost_ratio_p", "cost_ratio_significant",
        "cost_ratio_p_holm", "cost_ratio_significant_holm",
        "gap", "gap_ci_low", "gap_ci_high",
    ])
    assert [(r["name"], r["runs"]) for r in t.rows][:2] == [("BASELINE", "8 runs"), ("A", "4 runs")]
    assert [r["n_tasks"] for r in _csv(t)] == ["4", "4", "3", "4"]
    assert t.group_of == ["baseline", "evaluations", "evaluations", "evaluations"]


def test_estimates_carry_marks_after_holm_and_both_p_values():
    t, holm = _fill()
    # one family of two tests: 0.01·2 = 0.02 < 0.05 keeps †, max(0.04·1, 0.02) = 0.04 keeps † too
    assert [r["cost"] for r in t.rows] == ["", "0.50 [0.40, 0.60]*†", "0.90 [0.80, 1.00]*†", fmt.NA]
    data = _csv(t)
    assert [float(r["cost_ratio_p_holm"]) for r in data[1:3]] == pytest.approx([0.02, 0.04])
    assert [r["cost_ratio_significant_holm"] for r in data] == ["", "true", "true", ""]
    assert holm is not None and holm.sizes() == {"cost": 2}
    # an untested estimate: no marks, no p-values; a baseline shows its own field
    assert [r["gap"] for r in t.rows] == ["+1.2", "-2.0 [-2.1, -1.9]", fmt.NA, fmt.NA]
    assert [r["gap"] for r in data] == ["1.25", "-2", "", ""]


def test_an_undefined_estimate_can_count_as_none():
    spec = Spec("t", "t", (Estimate("e", "E", "m", data="e", undefined_is_none=True),), group=lambda r: "")
    t, holm = spec.fill([{"configuration": "a"}], SETTINGS, lambda r, m: _effect(float("nan"), 0.5, False))
    assert t.rows == [{"e": fmt.NA}] and _csv(t)[0]["e_p"] == "" and holm.sizes() == {}
    kept = Spec("t", "t", (Estimate("e", "E", "m", data="e"),), group=lambda r: "")
    t, holm = kept.fill([{"configuration": "a"}], SETTINGS, lambda r, m: _effect(float("nan"), 0.5, False))
    assert t.rows == [{"e": fmt.NA}] and _csv(t)[0]["e_significant"] == "false" and holm.sizes() == {"m": 1}


def test_a_table_without_tests_has_no_holm_families():
    spec = Spec("t", "t", (Column("n", "N", data="n_tasks"),), group=lambda r: "")
    assert spec.fill(ROWS, SETTINGS, lambda r, m: None)[1] is None


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_every_table_shows_each_heading_and_writes_each_column_once(name):
    settings = StatsSettings.from_section({"resamples": 200, "seed": 1})
    runs = runs_table()
    costs = pa.Table.from_pylist([
        {**dict.fromkeys(RUN_COSTS_SCHEMA.names), "run_id": r["run_id"], "profile": "paper", "calls": 10,
         "reported_calls": 10, "reported_prompt_tokens": 1000, "reported_cached_tokens": 500,
         "reconstructed_prompt_tokens": 1000, "reconstructed_cached_tokens": 600, "cost_reported": 1.0,
         "cost_cache_on_reported": 0.9, "cost_cached": 0.1, "cost_new": 0.1, "cost_rebilled": 0.0,
         "cost_cache_write": 0.0, "cost_output": 0.1}
        for r in runs.to_pylist()
    ], schema=RUN_COSTS_SCHEMA)
    out = compute_statistics(runs, tool_calls_table(), costs, settings, profile="paper",
                             task_order=["A", "B", "C", "D"])
    st = StatsTables.from_tables(out["effects"], out["comparisons"], out["summary"], settings,
                                 validation=out["cache_validation"])
    t = BUILDERS[name](st)
    header = to_csv(t).splitlines()[0].split(",")
    assert len(header) == len(set(header)) and len({h.key for h in t.columns}) == len(t.columns)
    assert t.rows and all(list(r) == [h.key for h in t.columns] for r in t.rows)
    assert all(len(r) == len(header) for r in csv.reader(io.StringIO(to_csv(t))))


def test_an_interval_on_fewer_than_all_resamples_shows_its_count():
    # 200 resamples: one effect defined in 131 of them, one in all; an untested one in 150
    spec = Spec("t", "t", (Estimate("e", "E", "m", data="e"), Estimate("d", "D", "d", data="d", tested=False)),
                group=lambda r: "")
    effects = {("a", "m"): {**_effect(2.0, 0.001, True), "n_undefined": 69},
               ("b", "m"): {**_effect(2.0, 0.001, True), "n_undefined": 0},
               ("a", "d"): {**_effect(3.0, float("nan"), None), "n_undefined": 50},
               ("b", "d"): {**_effect(float("nan"), float("nan"), None), "n_undefined": 200}}
    t, holm = spec.fill([{"configuration": "a"}, {"configuration": "b"}], SETTINGS,
                        lambda r, m: effects.get((r["configuration"], m)))
    assert [r["e"] for r in t.rows] == ["2.00 [1.90, 2.10]*† (131/200)", "2.00 [1.90, 2.10]*†"]
    # an undefined estimate shows – alone: there is no interval to qualify
    assert [r["d"] for r in t.rows] == ["3.00 [2.90, 3.10] (150/200)", fmt.NA]
    notes = " ".join(holm.notes())
    assert "(k/200) beside an interval: it and the p-value rest on the k of the 200 resamples" in notes
    assert "(2 cells; the fewest: 131/200)" in notes


def test_a_significant_result_on_too_few_tasks_is_not_marked():
    spec = Spec("t", "t", (Estimate("e", "E", "m", data="e"),), group=lambda r: "")
    rows = [{"configuration": c} for c in ("few", "enough", "few_not_significant")]
    effects = {"few": {**_effect(2.0, 0.001, True), "n_tasks": 3},
               "enough": {**_effect(2.0, 0.001, True), "n_tasks": 10},
               "few_not_significant": {**_effect(1.0, 0.6, False), "n_tasks": 3}}
    for threshold, shown in ((10, ["2.00 [1.90, 2.10]‡", "2.00 [1.90, 2.10]*†", "1.00 [0.90, 1.10]"]),
                             (0, ["2.00 [1.90, 2.10]*†", "2.00 [1.90, 2.10]*†", "1.00 [0.90, 1.10]"])):
        settings = StatsSettings.from_section({"resamples": 200, "seed": 1, "min_paired_tasks": threshold})
        t, holm = spec.fill(rows, settings, lambda r, m: effects[r["configuration"]])
        assert [r["e"] for r in t.rows] == shown
        assert (r"\textsuperscript{\ddag}" in to_latex(t)) == (threshold == 10)
        # the CSV keeps the decisions as computed
        assert [r["e_significant"] for r in _csv(t)] == ["true", "true", "false"]
        notes = " ".join(holm.notes())
        assert ("‡ the CI excludes the null, but on fewer than 10 paired tasks (statistics.min_paired_tasks; "
                "1 cell, on 3 tasks)" in notes) == (threshold == 10)
    with pytest.raises(Exception, match="min_paired_tasks"):
        StatsSettings.from_section({"min_paired_tasks": -1})
