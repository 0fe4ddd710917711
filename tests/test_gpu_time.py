"""The throughput model of docs/cluster.md: a batch job's time limit derived from its runs and
the worst case per run, and the study's GPU-hours as a range (typical–worst case)."""

from __future__ import annotations

import io
from contextlib import redirect_stdout

import pytest

from forgetting.cli import main
from forgetting.run.gpu_time import batch_minutes, batch_runtime_min, run_cost, worst_calls
from forgetting.study.config import load_study
from forgetting_testkit.checkout import ROOT

STUDY = ROOT / "config" / "config.yaml"


def test_a_run_by_the_models_figures():
    typical = run_cost(40)
    assert typical.mean_prompt == 2000 + 1100 * 39 / 2 == 23450
    # prefill 40 × 23,450 × 0.25 / 15,000 = 15.63 s, decode 40 × 400 / 1,500 = 10.67 s
    assert typical.gpu_s == pytest.approx(26.30)
    assert typical.wall_s == pytest.approx(40 * (400 / 95 + 23450 * 0.25 / 15000 + 4))
    worst = run_cost(200)  # prefill grows with the square of the calls
    assert worst.mean_prompt == 111450 and worst.gpu_s == pytest.approx(424.83, abs=0.01)


def test_a_batch_of_100_runs_16_at_a_time():
    assert batch_minutes(100, 16, 40) == pytest.approx(55.57, abs=0.01)  # GPU-bound: 100 × 26.3 s
    assert batch_minutes(100, 16, 200) == pytest.approx(747.62, abs=0.01)  # every run at the 200-call cap


def test_the_time_limit_is_the_worst_case_at_most_the_partitions(tmp_path):
    study = load_study(STUDY)
    assert worst_calls(study) == 200
    assert batch_runtime_min(study, 100) == 720  # 748 min in the worst case: the partition's limit
    assert batch_runtime_min(study, 50) == 394 and batch_runtime_min(study, 1) == 74
    shorter = load_study(STUDY, {"model": {**study.raw["model"], "vllm": {"max_model_len": 131072}}})
    assert worst_calls(shorter) == 118  # the 119th call's prompt would pass 131,072 tokens
    fixed = load_study(STUDY, {"execution": {**study.raw["execution"], "batch_runtime_min": 300}})
    assert batch_runtime_min(fixed, 100) == 300
    longer = load_study(STUDY, {"execution": {**study.raw["execution"], "batch_runtime_limit_min": 1440}})
    assert batch_runtime_min(longer, 100) == 748


def test_plan_prints_the_gpu_hours_as_a_range():
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["plan", str(STUDY)]) == 0
    lines = out.getvalue().splitlines()
    assert lines[1] == ("GPU time: 94 batch jobs × 1 GPU: 87–1,171 GPU-hours (typical: 40 calls per run, 56 min per "
                        "batch; worst case: every run at 200 calls, 748 min; docs/cluster.md)")
    # derived, capped by the key the schema has (execution.batch_runtime_limit_min)
    assert lines[2] == ("time limit per batch job: 720 min (derived from the worst case, at most "
                        "execution.batch_runtime_limit_min)")
    assert lines[3].startswith("note: 94 batches could pass their time limit in the worst case")
    demo = io.StringIO()
    with redirect_stdout(demo):
        main(["plan", str(ROOT / "config" / "demo.yaml")])
    assert len(demo.getvalue().splitlines()) == 1  # no GPU: the scripted stand-in
