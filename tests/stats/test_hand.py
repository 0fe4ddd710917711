"""Hand-built datasets: every estimate computed by hand, every bootstrap row checked explicitly.

Four tasks A–D; the baseline runs twice per task, two configurations once. The expected
numbers in the comments are worked out from the rows of :mod:`forgetting_testkit.hand_study`.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from forgetting.report.stats.comparisons import Bootstrap
from forgetting.report.stats.metrics import StudyData
from forgetting.report.stats.run import compute_statistics
from forgetting.study.plan import run_id
from forgetting.study.statistics import StatsSettings
from forgetting_testkit.hand_study import DELAYED, DISTANCES, IMMEDIATE, RUNS, runs_table, tool_calls_table


def effects_of(settings: StatsSettings, runs: pa.Table | None = None) -> dict[tuple[str, str], dict]:
    out = compute_statistics(
        runs if runs is not None else runs_table(),
        tool_calls_table(),
        None,
        settings,
        task_order=["A", "B", "C", "D"],
    )
    return out, {(r["configuration"], r["metric"]): r for r in out["effects"].to_pylist()}


SETTINGS = StatsSettings.from_section({"resamples": 500, "seed": 1})


def test_point_estimates_by_hand():
    out, e = effects_of(SETTINGS)
    # baseline tasks solved = Σ per-task means = 1 + 0.5 + 0 + 1 = 2.5; delayed solves A and D
    assert (e[DELAYED, "tasks_solved"]["value"], e[DELAYED, "tasks_solved"]["reference"]) == (2.0, 2.5)
    assert e[DELAYED, "tasks_solved"]["estimate"] == pytest.approx(-0.5)
    assert e[IMMEDIATE, "tasks_solved"]["estimate"] == pytest.approx(-1.5)
    # pooled baseline turns 10 30 40 50 | 60 70 80 90 → 55; delayed 20 40 | 60 100 → 50
    assert e[DELAYED, "turns"]["reference"] == 55 and e[DELAYED, "turns"]["value"] == 50
    assert e[DELAYED, "turns"]["estimate"] == pytest.approx(50 / 55)
    # totals of per-task means: baseline flat 5 + 3.5 + 5.5 + 7.5 = 21.5, delayed 2 + 6 + 10 + 4 = 22
    assert e[DELAYED, "cost_flat"]["estimate"] == pytest.approx(22 / 21.5)
    assert e[DELAYED, "cost_cache"]["estimate"] == pytest.approx(22 / 10.75)
    assert e[DELAYED, "input_tokens"]["estimate"] == pytest.approx(11000 / 21500)
    assert e[DELAYED, "output_tokens"]["estimate"] == pytest.approx(2200 / 2150)
    # re-fetch rate pooled: baseline (0.5 + 0.5 + 0.5 + 0) / (4 + 5 + 5 + 2) = 1.5 / 16; delayed 6 / 20
    assert e[DELAYED, "refetch_rate"]["reference"] == pytest.approx(1.5 / 16)
    assert e[DELAYED, "refetch_rate"]["estimate"] == pytest.approx(0.3 / (1.5 / 16))
    # cost per task solved (caching-aware): (22 / 2) / (10.75 / 2.5)
    assert e[DELAYED, "cost_per_solved"]["estimate"] == pytest.approx(11 / 4.3)
    # deleted outputs re-fetched 5 of 10, kept 1 of 10
    dvk = e[DELAYED, "deleted_vs_kept"]
    assert (dvk["value"], dvk["reference"], dvk["estimate"]) == pytest.approx((0.5, 0.1, 5.0))
    # the immediate configuration deletes no read output (in this dataset): no test
    assert (
        np.isnan(e[IMMEDIATE, "deleted_vs_kept"]["estimate"])
        and e[IMMEDIATE, "deleted_vs_kept"]["significant"] is None
    )
    # distances: delayed 2 3 4 | 5 7 9 → 4.5; baseline 6 8 10 → 8
    dist = e[DELAYED, "refetch_distance"]
    assert (dist["value"], dist["reference"]) == (4.5, 8.0) and dist["p_value"] != dist["p_value"]
    summary = {r["configuration"]: r for r in out["summary"].to_pylist()}
    assert (
        summary["baseline"]["capped"] == 0.5
        and summary[DELAYED]["capped"] == 1
        and summary[DELAYED]["looping"] == 1
    )
    assert summary["baseline"]["tasks_solved"] == 2.5 and summary["baseline"]["repeats"] == 2


def test_options_change_the_estimates_as_documented():
    _, e = effects_of(StatsSettings.from_section({"resamples": 200, "seed": 1, "baseline_median": "task_mean"}))
    # per-task mean turns 50 35 55 75 → median 52.5 (pooled: 55)
    assert e[DELAYED, "turns"]["reference"] == 52.5
    _, e = effects_of(StatsSettings.from_section({"resamples": 200, "seed": 1, "refetch_rate": "run_mean"}))
    # baseline run rates 0 .25 .1 (B2: no reads) 0 .2 0 0 → 0.55 / 7; delayed .5 .2 (C: none) 0 → 0.7 / 3
    assert e[DELAYED, "refetch_rate"]["reference"] == pytest.approx(0.55 / 7)
    assert e[DELAYED, "refetch_rate"]["estimate"] == pytest.approx((0.7 / 3) / (0.55 / 7))
    _, e = effects_of(StatsSettings.from_section({"resamples": 200, "seed": 1, "cost_statistic": "median"}))
    # flat cost medians: baseline pooled 1 3 4 5 6 7 8 9 → 5.5; delayed 2 4 6 10 → 5
    assert e[DELAYED, "cost_flat"]["estimate"] == pytest.approx(5 / 5.5)


def test_paired_comparison_by_hand():
    out, _ = effects_of(SETTINGS)
    rows = {(r["comparison"], r["metric"]): r for r in out["comparisons"].to_pylist()}
    assert {k[0] for k in rows} == {"timing"}  # no turn/token pair in this dataset
    solved = rows["timing", "tasks_solved"]
    assert (solved["first"], solved["second"]) == (DELAYED, IMMEDIATE)
    assert solved["estimate"] == pytest.approx(-1.0)  # immediate solves 1, delayed 2
    # immediate turns 40 60 | 80 120 → 70: ratio 70/55 against 50/55
    assert rows["timing", "turns"]["estimate"] == pytest.approx(70 / 55 - 50 / 55)


def test_every_bootstrap_row_equals_the_explicit_resample():
    data = StudyData.from_tables(runs_table(), tool_calls_table(), task_order=["A", "B", "C", "D"])
    boot = Bootstrap(data, StatsSettings.from_section({"resamples": 300, "seed": 7}))
    base, conf = data.baseline("mini"), data.groups[("mini", DELAYED)]
    mask = np.ones(4, dtype=bool)
    _, b = boot.statistics(base, mask)
    _, c = boot.statistics(conf, mask)
    tasks = "ABCD"
    for r, w in enumerate(boot.weights):
        pick = [t for t, k in zip(tasks, w, strict=True) for _ in range(int(k))]  # the resampled task list
        base_runs = [RUNS["baseline", t, rep] for t in pick for rep in (1, 2)]
        conf_runs = [RUNS[DELAYED, t, 1] for t in pick]
        solved_base = sum(np.mean([RUNS["baseline", t, rep][0] for rep in (1, 2)]) for t in pick)
        assert b["solved"][r] == pytest.approx(solved_base)
        assert c["solved"][r] == sum(x[0] for x in conf_runs)
        assert b["turns"][r] == np.median([x[1] for x in base_runs])
        assert c["turns"][r] == np.median([x[1] for x in conf_runs])
        reads = sum(x[2] for x in conf_runs)
        rate = sum(x[3] for x in conf_runs) / reads if reads else np.nan
        assert c["refetch_rate"][r] == pytest.approx(rate, nan_ok=True)
        dists = [d for t in pick for d in DISTANCES.get((DELAYED, t, 1), [])]
        assert c["refetch_distance"][r] == pytest.approx(np.median(dists) if dists else np.nan, nan_ok=True)


def test_bootstrap_is_deterministic_and_the_interval_brackets_the_estimate(tmp_path):
    from forgetting.records.schemas import write_table

    a, ea = effects_of(SETTINGS)
    b, _ = effects_of(SETTINGS)
    for name in ("effects", "comparisons", "summary"):
        write_table(a[name], tmp_path / f"a-{name}.parquet")
        write_table(b[name], tmp_path / f"b-{name}.parquet")
        assert (tmp_path / f"a-{name}.parquet").read_bytes() == (tmp_path / f"b-{name}.parquet").read_bytes()
    d = ea[DELAYED, "tasks_solved"]
    assert d["ci_low"] <= d["estimate"] <= d["ci_high"]
    _, ec = effects_of(StatsSettings.from_section({"resamples": 500, "seed": 2}))
    assert (
        ec[DELAYED, "turns"]["ci_low"] != ea[DELAYED, "turns"]["ci_low"]
        or ec[DELAYED, "turns"]["ci_high"] != ea[DELAYED, "turns"]["ci_high"]
    )


def test_missing_runs_restrict_the_comparison_to_the_tasks_both_sides_have():
    missing = {run_id("mini", DELAYED, "C", 1), run_id("mini", "baseline", "B", 2)}
    out, e = effects_of(SETTINGS, runs_table(missing=missing))
    # delayed compared on A, B, D; baseline B from its one run: 2 − (1 + 1 + 1) = −1
    assert e[DELAYED, "tasks_solved"]["n_tasks"] == 3
    assert e[DELAYED, "tasks_solved"]["estimate"] == pytest.approx(-1.0)
    assert e[IMMEDIATE, "tasks_solved"]["n_tasks"] == 4
    # immediate: 1 − (1 + 1 + 0 + 1)
    assert e[IMMEDIATE, "tasks_solved"]["estimate"] == pytest.approx(-2.0)
    summary = {r["configuration"]: r for r in out["summary"].to_pylist()}
    assert (summary[DELAYED]["n_missing"], summary["baseline"]["n_missing"]) == (1, 1)


def test_a_study_without_baseline_runs_is_a_one_line_error():
    from forgetting.foundation.errors import RunOutputError

    only_conf = {k: v for k, v in RUNS.items() if k[0] != "baseline"}
    with pytest.raises(RunOutputError, match="no baseline runs"):
        compute_statistics(runs_table(only_conf), None, None, SETTINGS)


def _explicit_interval(tasks: str, conf: str, resamples: int, seed: int) -> tuple[float, float]:
    """The flat-cost ratio's percentile interval from resampling ``tasks`` alone, written out:
    draw len(tasks) of them with replacement, total each side's per-task mean cost."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(tasks), size=(resamples, len(tasks)))

    def cost(c: str, t: str) -> float:
        return float(np.mean([RUNS[c, t, rep][1] / 10 for rep in (1, 2) if (c, t, rep) in RUNS]))

    ratios = [sum(cost(conf, tasks[i]) for i in row) / sum(cost("baseline", tasks[i]) for i in row) for row in picks]
    lo, hi = np.percentile(ratios, [2.5, 97.5])
    return float(lo), float(hi)


@pytest.mark.parametrize("how", ["missing", "exclude"])
def test_a_comparison_on_fewer_tasks_resamples_those_tasks_alone(how):
    # task C's delayed run missing, or its evaluation errored under on_error: exclude: the
    # delayed comparison is on A, B, D, and each resample draws 3 of those three (not 4 of
    # the study's four with C's draws weighing nothing)
    rid = run_id("mini", DELAYED, "C", 1)
    if how == "missing":
        runs, settings = runs_table(missing={rid}), SETTINGS
    else:
        runs = runs_table(eval_errors={rid})
        settings = StatsSettings.from_section({"resamples": 500, "seed": 1}, on_error="exclude")
    _, e = effects_of(settings, runs)
    row = e[DELAYED, "cost_flat"]
    assert row["n_tasks"] == 3
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(_explicit_interval("ABD", DELAYED, 500, 1))
    # the immediate configuration has all four tasks: resampled as before, all four
    full = e[IMMEDIATE, "cost_flat"]
    assert (full["ci_low"], full["ci_high"]) == pytest.approx(_explicit_interval("ABCD", IMMEDIATE, 500, 1))
