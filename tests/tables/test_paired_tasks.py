"""One task set per row (issue 15, item 5): with runs missing, every column of a Table I or
cost-breakdown row is computed on the tasks the evaluation and its baseline both have — the
tasks its Δ and ratios compare — and the footnote says how many. Hand data of
tests/stats/test_hand.py, with the baseline's two runs of task A missing."""

from __future__ import annotations

import pyarrow as pa
import pytest

from forgetting.records.schemas import RUN_COSTS_SCHEMA
from forgetting.report.stats.run import compute_statistics
from forgetting.report.tables.build import StatsTables, cost_breakdown, table1
from forgetting.study.plan import run_id
from forgetting.study.statistics import StatsSettings
from forgetting_testkit.hand_study import DELAYED, IMMEDIATE, RUNS, runs_table, tool_calls_table

TASKS = ["A", "B", "C", "D"]
SETTINGS = StatsSettings.from_section({"resamples": 300, "seed": 3, "missing_runs": "mark"})
MISSING = {run_id("mini", "baseline", "A", 1), run_id("mini", "baseline", "A", 2)}


def run_costs_table(runs: pa.Table) -> pa.Table:
    """Half of each run's caching-aware cost cached, half new."""
    rows = []
    for r in runs.to_pylist():
        if r["status"] == "missing":
            continue
        row = dict.fromkeys(RUN_COSTS_SCHEMA.names)
        half = r["cost_cache"] / 2
        row.update(run_id=r["run_id"], profile="paper", cost_cached=half, cost_new=half, cost_rebilled=0.0,
                   cost_cache_write=0.0, cost_output=0.0, cost_cache=r["cost_cache"], cost_flat=r["cost_flat"])
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=RUN_COSTS_SCHEMA)


@pytest.fixture(scope="module")
def out():
    runs = runs_table(missing=MISSING)
    return compute_statistics(runs, tool_calls_table(), run_costs_table(runs), SETTINGS, profile="paper",
                              task_order=TASKS)


def test_every_summary_figure_of_an_evaluation_is_on_the_tasks_its_effects_compare(out):
    effects = {(r["configuration"], r["metric"]): r for r in out["effects"].to_pylist()}
    summary = {r["configuration"]: r for r in out["summary"].to_pylist()}
    row = summary[DELAYED]
    # the baseline has no run of A: the delayed configuration is compared on B, C, D, where it solves D
    assert row["n_tasks"] == effects[DELAYED, "tasks_solved"]["n_tasks"] == 3
    assert row["tasks_solved"] == effects[DELAYED, "tasks_solved"]["value"] == 1.0  # not 2 (A and D)
    for column, metric in (("median_turns", "turns"), ("input_tokens", "input_tokens"),
                           ("output_tokens", "output_tokens"), ("cost_flat", "cost_flat"),
                           ("cost_cache", "cost_cache"), ("refetch_rate", "refetch_rate")):
        assert row[column] == pytest.approx(effects[DELAYED, metric]["value"]), column
    # turns 60 100 40 → 60; capped (C) and looping (B) on those tasks
    assert (row["median_turns"], row["capped"], row["looping"]) == (60, 1, 1)
    # the baseline on its own tasks, B, C, D: 0.5 + 0 + 1
    assert (summary["baseline"]["n_tasks"], summary["baseline"]["tasks_solved"]) == (3, 1.5)
    # the immediate configuration too is on B, C, D only (it solves D)
    assert (summary[IMMEDIATE]["n_tasks"], summary[IMMEDIATE]["tasks_solved"]) == (3, 1.0)


def test_table1_row_and_footnote_use_one_task_set(out):
    st = StatsTables.from_tables(out["effects"], out["comparisons"], out["summary"], SETTINGS, study_tasks=4)
    t = table1(st)
    (i,) = [k for k, d in enumerate(t.data) if d["configuration"] == DELAYED]
    data = t.data[i]
    assert t.rows[i]["solved"] == "1" and data["n_tasks"] == 3
    # Solved minus the baseline's solved on the same tasks is the row's Δ
    assert data["tasks_solved"] - 1.5 == pytest.approx(data["delta_solved"]) == -0.5
    notes = " ".join(t.notes)
    assert "Computed on fewer than the study's 4 tasks (runs missing;" in notes
    assert f"mini/{DELAYED} (3 tasks; the baseline solves 1.5 of them)" in notes


def test_cost_breakdown_compares_with_the_baseline_on_the_same_tasks(out):
    st = StatsTables.from_tables(out["effects"], out["comparisons"], out["summary"], SETTINGS, study_tasks=4)
    rows = {d["configuration"]: d for d in cost_breakdown(st).data}
    # caching-aware cost on B, C, D: delayed 6 + 10 + 4 = 20 (turns / 10); baseline per-task means of
    # turns / 20: 1.75 + 2.75 + 3.75 = 8.25 — with A (2.0) the delayed total would be 22
    assert rows[DELAYED]["cost_total"] == pytest.approx(20.0)
    assert rows[DELAYED]["ratio_to_baseline"] == pytest.approx(20 / 8.25)
    assert rows["baseline"]["ratio_to_baseline"] == pytest.approx(1.0)
    # and the same ratio as Table II's caching-aware ratio of totals
    effect = next(r for r in out["effects"].to_pylist()
                  if r["configuration"] == DELAYED and r["metric"] == "cost_cache")
    assert rows[DELAYED]["ratio_to_baseline"] == pytest.approx(effect["estimate"])


def test_with_every_run_present_nothing_changes():
    full = compute_statistics(runs_table(), tool_calls_table(), None, SETTINGS, task_order=TASKS)
    summary = {r["configuration"]: r for r in full["summary"].to_pylist()}
    assert all(r["n_tasks"] == 4 for r in summary.values())
    assert summary[DELAYED]["tasks_solved"] == sum(RUNS[DELAYED, t, 1][0] for t in TASKS) == 2
