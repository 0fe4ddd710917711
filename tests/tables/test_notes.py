"""Table notes describe what was computed (issue 15, item 6): each is generated from the settings
the statistics used, so changing a setting changes its note — and the note says what the number
under it is (checked against the hand data of tests/stats/test_hand.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from forgetting.cost.pricing import load_profile
from forgetting.report.collect import collect
from forgetting.report.stats.run import compute_statistics
from forgetting.report.tables.build import BUILDERS, StatsTables
from forgetting.report.tables.notes import NoteContext, cache_rules
from forgetting.study.statistics import StatsSettings
from forgetting_testkit.checkout import ROOT
from forgetting_testkit.hand_study import DELAYED, runs_table, tool_calls_table
from forgetting_testkit.stats_study import make_study

BASE = StatsSettings.from_section({"resamples": 300, "seed": 3})


def tables(settings: StatsSettings, context: NoteContext | None = None):
    out = compute_statistics(runs_table(), tool_calls_table(), None, settings, task_order=["A", "B", "C", "D"])
    st = StatsTables.from_tables(out["effects"], out["comparisons"], out["summary"], settings, context=context)
    effects = {(r["configuration"], r["metric"]): r for r in out["effects"].to_pylist()}
    return {name: build(st) for name, build in BUILDERS.items()}, effects


def notes(built, name: str) -> str:
    return " ".join(built[name].notes)


def headers(built, name: str) -> list[str]:
    return [c.header for c in built[name].columns]


def test_bootstrap_settings_appear_in_every_note_and_header():
    built, _ = tables(BASE)
    changed, _ = tables(dataclasses.replace(BASE, resamples=400, seed=9, confidence=0.9))
    for name in BUILDERS:
        if name == "cost_breakdown":  # point values only (issue 27, item 5)
            assert "Paired bootstrap" not in notes(built, name) and "no confidence intervals" in notes(built, name)
            continue
        assert "Paired bootstrap over the 4 tasks: 300 resamples (seed 3), 95 % percentile CIs" in notes(built, name)
        assert "Paired bootstrap over the 4 tasks: 400 resamples (seed 9), 90 % percentile CIs" in notes(changed, name)
    assert "Δ solved [95 % CI]" in headers(built, "table1") and "Δ solved [90 % CI]" in headers(changed, "table1")
    assert "Caching-aware [90 % CI]" in headers(changed, "table2")
    assert r"Caching-aware [90\,\% CI]" in {c.latex for c in changed["table2"].columns}
    assert "α = 0.05" in notes(built, "table1") and "α = 0.1" in notes(changed, "table1")


def test_the_median_note_follows_baseline_median_and_matches_the_number():
    pooled, e_pooled = tables(BASE)
    task_mean, e_task = tables(dataclasses.replace(BASE, baseline_median="task_mean"))
    # pooled: the baseline's median over its 8 runs is 55; task_mean: the median of per-task means is 52.5
    assert e_pooled[DELAYED, "turns"]["reference"] == 55 and e_task[DELAYED, "turns"]["reference"] == 52.5
    assert "Median turns: the median over runs, pooling every repeat of each resampled task" in notes(pooled, "table1")
    assert ("Median turns: for a set with several repeats per task (the baseline), the median over tasks of each "
            "task's mean over its repeats") in notes(task_mean, "table1")
    assert "the baseline per task is the mean over its repeats" not in notes(pooled, "table1")  # the old claim


def test_the_cost_note_follows_cost_statistic():
    total, e_total = tables(BASE)
    median, e_median = tables(dataclasses.replace(BASE, cost_statistic="median"))
    assert e_total[DELAYED, "cost_flat"]["estimate"] == pytest.approx(22 / 21.5)  # totals
    assert e_median[DELAYED, "cost_flat"]["estimate"] == pytest.approx(5 / 5.5)  # medians
    assert "token and cost columns are ratios of totals" in notes(total, "table2")
    assert "token and cost columns are ratios of medians over runs, pooling every repeat" in notes(median, "table2")
    for name in ("policies_comparison", "comparisons"):
        assert "ratios of totals" in notes(total, name) and "ratios of medians" in notes(median, name)
    # the cost breakdown is a ratio of totals either way, and says so when Table II differs
    assert "Table II's caching-aware column compares medians" in notes(median, "cost_breakdown")
    assert "compares medians" not in notes(total, "cost_breakdown")


def test_the_refetch_note_follows_refetch_rate_and_the_threshold():
    pooled, _ = tables(BASE)
    run_mean, _ = tables(dataclasses.replace(BASE, refetch_rate="run_mean"), NoteContext(refetch_threshold=0.7))
    assert "Re-fetch rate: re-fetches / reads, pooled over the runs" in notes(pooled, "refetch")
    assert "≥ 80 % of its distinct lines" in notes(pooled, "refetch")
    assert "Re-fetch rate: the mean of the runs' re-fetch rates" in notes(run_mean, "refetch")
    assert "≥ 70 % of its distinct lines" in notes(run_mean, "refetch")


def test_the_holm_note_names_the_families_as_formed():
    column, _ = tables(BASE)
    table, _ = tables(dataclasses.replace(BASE, holm_family="table"))
    # Table I: Δ solved and run length, one test per evaluation (2 evaluations)
    assert "over each column as its own family (2 families of 2 tests; α = 0.05)" in notes(column, "table1")
    assert "over all 4 tests of this table as one family (α = 0.05)" in notes(table, "table1")
    # the comparisons: one family per comparison kind and column (one delayed → immediate pair, 5 columns)
    assert ("over each comparison kind within a column as its own family (5 families of 1 test;"
            in notes(column, "comparisons"))


def test_the_eval_error_note_follows_on_error_and_the_analysis_settings():
    for on_error in ("fail", "exclude", "unresolved"):
        built, _ = tables(dataclasses.replace(BASE, on_error=on_error), NoteContext(looping_window=5, turn_cap=60))
        text = notes(built, "table1")
        assert f"evaluation.on_error: {on_error}" in text
        assert "turn cap (60 model calls)" in text and "runs with 5 identical tool calls in a row" in text


def test_the_pricing_note_names_the_profile_and_its_cache_rules():
    paper = NoteContext(pricing=("paper", cache_rules(load_profile(ROOT / "resources/pricing/paper.yaml"))))
    ttl = NoteContext(pricing=("write-premium-ttl",
                               cache_rules(load_profile(ROOT / "resources/pricing/write-premium-ttl.yaml"))))
    built_paper, _ = tables(BASE, paper)
    built_ttl, _ = tables(BASE, ttl)
    assert "pricing profile paper: a lower bound, no expiry and no write premium" in notes(built_paper, "table2")
    text = notes(built_ttl, "table2")
    assert "with pricing profile write-premium-ttl's rules:" in text and "lower bound" not in text
    assert "entries expire 300 s after their last use" in text and "cache writes at 1.25× the input price" in text


def test_tables_refuse_statistics_computed_with_other_settings(tmp_path, run_cli):
    study = make_study(tmp_path, n_tasks=4)
    collect(study)
    assert run_cli("report", study.source, "--only", "stats", "--only", "tables").returncode == 0
    config = Path(study.source)
    cfg = yaml.safe_load(config.read_text())
    cfg["statistics"]["resamples"] = 2000
    config.write_text(yaml.safe_dump(cfg))
    proc = run_cli("report", study.source, "--only", "tables")
    assert proc.returncode == 2
    effects = tmp_path / "results" / "stats" / "effects.parquet"
    assert proc.stderr.strip() == (
        f"error: {effects}: computed with statistics.resamples = 1000, the config says 2000; "
        "recompute the statistics (forgetting report CONFIG --only stats)"
    )
    assert run_cli("report", study.source, "--only", "stats", "--only", "tables").returncode == 0


def test_intervals_on_fewer_resamples_show_their_count_in_every_table():
    built, effects = tables(BASE)
    # the delayed configuration deletes read outputs on A and B only: a resample of C and D alone
    # has no deleted or kept output, so deleted/kept and the distance are undefined there
    dvk = effects[DELAYED, "deleted_vs_kept"]
    assert 0 < dvk["n_undefined"] < 300
    row = next(r for r in built["refetch"].rows if r["dvk"].startswith("5.00"))
    assert row["dvk"].endswith(f" ({300 - dvk['n_undefined']}/300)")
    assert "(k/300) beside an interval: it and the p-value rest on the k of the 300 resamples" in notes(
        built, "refetch")
    # an interval on every resample carries no count
    assert "/300)" not in " ".join(r["delta"] for r in built["table1"].rows)


def test_a_three_task_study_marks_nothing_significant_by_default(tmp_path):
    from forgetting.report.stats.run import write_stats
    from forgetting.report.tables import load_stats_tables

    study = make_study(tmp_path, n_tasks=3)
    collect(study)
    write_stats(study)
    st = load_stats_tables(study)
    table1 = BUILDERS["table1"](st)
    raw = [e for e in st.effects.values() if e["metric"] in ("tasks_solved", "turns") and e["significant"]]
    assert raw, "the synthetic 3-task study has significant results to withhold"
    cells = " ".join(r["delta"] + r["change"] for r in table1.rows)
    assert "*" not in cells and "†" not in cells and "‡" in cells
    assert "‡ the CI excludes the null, but on fewer than 10 paired tasks" in " ".join(table1.notes)
    # statistics.min_paired_tasks: 0 marks them as computed (a tables-stage setting: no recompute)
    marked = BUILDERS["table1"](dataclasses.replace(st, settings=dataclasses.replace(st.settings, min_paired_tasks=0)))
    assert "*" in " ".join(r["delta"] + r["change"] for r in marked.rows)


def _cost_breakdown(profile: str, baseline_rebilled: float) -> str:
    """The cost breakdown's notes on the hand study, every run priced under ``profile`` with the
    baseline's runs re-billing ``baseline_rebilled`` USD each (configurations: 0.05)."""
    import pyarrow as pa

    from forgetting.records.schemas import RUN_COSTS_SCHEMA

    runs = runs_table()
    costs = pa.Table.from_pylist([
        {**dict.fromkeys(RUN_COSTS_SCHEMA.names), "run_id": r["run_id"], "profile": profile, "calls": 10,
         "reported_calls": 0, "cost_cached": 0.1, "cost_new": 0.1,
         "cost_rebilled": baseline_rebilled if r["configuration"] == "baseline" else 0.05,
         "cost_cache_write": 0.0, "cost_output": 0.1}
        for r in runs.to_pylist()
    ], schema=RUN_COSTS_SCHEMA)
    out = compute_statistics(runs, tool_calls_table(), costs, BASE, profile=profile, task_order=["A", "B", "C", "D"])
    rules = cache_rules(load_profile(ROOT / f"resources/pricing/{profile}.yaml"))
    st = StatsTables.from_tables(out["effects"], out["comparisons"], out["summary"], BASE,
                                 context=NoteContext(pricing=(profile, rules)))
    return BUILDERS["cost_breakdown"](st).notes


def test_the_cost_breakdown_note_says_what_rebilled_is_under_the_primary_profile():
    paper = _cost_breakdown("paper", 0.0)
    # a table of point values: its first note says so, not the bootstrap's intervals
    assert paper[0].startswith("Point values, no confidence intervals") and "Paired bootstrap" not in " ".join(paper)
    assert "none in the baselines under profile paper" in " ".join(paper)
    blocks = " ".join(_cost_breakdown("vllm-blocks", 0.02))
    # under a profile that rounds hits down the baselines re-bill too: 0.02 / 0.32 of their cost
    assert "none in the baselines" not in blocks
    assert "because profile vllm-blocks's cache rules (hits from 0 tokens in steps of the server's KV block" in blocks
    assert "(mini-swe-agent 6.2 % of their cost)" in blocks


def test_the_cache_validation_gap_shows_its_count_of_resamples():
    import pyarrow as pa

    from forgetting.records.schemas import RUN_COSTS_SCHEMA

    runs = runs_table()
    # tasks C and D report no cached tokens: a resample of those alone has no gap
    costs = pa.Table.from_pylist([
        {**dict.fromkeys(RUN_COSTS_SCHEMA.names), "run_id": r["run_id"], "profile": "paper", "calls": 10,
         "reported_calls": 0 if r["task"] in "CD" else 10,
         "reported_prompt_tokens": 0 if r["task"] in "CD" else 1000,
         "reported_cached_tokens": 0 if r["task"] in "CD" else 500,
         "reconstructed_prompt_tokens": 0 if r["task"] in "CD" else 1000,
         "reconstructed_cached_tokens": 0 if r["task"] in "CD" else 600, "cost_reported": 1.0,
         "cost_cache_on_reported": 0.9, "cost_cached": 0.1, "cost_new": 0.1, "cost_rebilled": 0.0,
         "cost_cache_write": 0.0, "cost_output": 0.1}
        for r in runs.to_pylist()
    ], schema=RUN_COSTS_SCHEMA)
    out = compute_statistics(runs, tool_calls_table(), costs, BASE, profile="paper", task_order=["A", "B", "C", "D"])
    st = StatsTables.from_tables(out["effects"], out["comparisons"], out["summary"], BASE,
                                 validation=out["cache_validation"])
    undefined = {r["configuration"]: r["n_undefined"] for r in out["cache_validation"].to_pylist()}
    assert 0 < undefined["baseline"] < 300
    table = BUILDERS["cache_validation"](st)
    gaps = [r["gap"] for r in table.rows]
    assert gaps[0] == f"+10.0 [+10.0, +10.0] ({300 - undefined['baseline']}/300)", gaps
    assert "(k/300) beside an interval" in " ".join(table.notes)


def test_a_row_on_fewer_tasks_says_its_bootstrap_resamples_those_tasks():
    from forgetting.study.plan import run_id

    out = compute_statistics(runs_table(missing={run_id("mini", DELAYED, "C", 1)}), tool_calls_table(), None, BASE,
                             task_order=["A", "B", "C", "D"])
    st = StatsTables.from_tables(out["effects"], out["comparisons"], out["summary"], BASE)
    text = " ".join(BUILDERS["table1"](st).notes)
    assert f"mini/{DELAYED} (3 tasks" in text
    assert "The bootstrap of such a row resamples its own K tasks (each resample K draws from those K)" in text
    # the cost breakdown has no bootstrap: its note on fewer tasks says nothing of one
    assert "resamples its own" not in " ".join(BUILDERS["cost_breakdown"](st).notes)
