"""Partial reruns and resume, as the README documents them, shown by dry-run job lists.

Each test runs ``snakemake -n --profile profiles/slurm`` on a small study (two agents, two
configurations and the baseline, three tasks, batches of two runs: 14 batches) and checks
that the jobs it lists are exactly those the narrowing or the finished outputs call for.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from forgetting.study.config import study_from_mapping
from forgetting.study.plan import plan_batches
from forgetting_testkit.checkout import ROOT
from forgetting_testkit.dryrun import by_rule, dry_run, small_study

CONF = "delayed-turn-tool_output-50"
BATCH_OUTPUTS = ("runs.json", "eval.json", "summary.parquet", "calls.parquet", "tool_calls.parquet", "timings.parquet",
                 "run_costs.parquet")


def batches_of(cfg: dict, **overrides) -> list:
    return plan_batches(study_from_mapping({**cfg, **overrides}, source="test", root=ROOT))


def keys(jobs) -> set[str]:
    return {j.batch_key for j in jobs}


@pytest.fixture
def study(tmp_path):
    return small_study(tmp_path)


def test_full_study_lists_every_batch_once_per_stage(study, tmp_path):
    jobs = dry_run(study, tmp_path)
    expected = {b.key for b in batches_of(study)}
    assert len(expected) == 14  # per agent: 2 + 2 batches of the configurations, 3 of the baseline
    for rule in ("run_batch", "evaluate_batch", "analyze_batch"):
        assert keys(by_rule(jobs, rule)) == expected, rule
        assert len(by_rule(jobs, rule)) == 14
    assert len(by_rule(jobs, "collect")) == 1
    assert not by_rule(jobs, "build_gpu_image") and not by_rule(jobs, "build_cpu_image")
    assert not by_rule(jobs, "pull_swebench_images")


def test_one_configuration_touches_only_its_batches_under_the_full_plans_names(study, tmp_path):
    jobs = dry_run(study, tmp_path, "--config", f"only={CONF}")
    full = {b.key for b in batches_of(study) if b.configuration == CONF}
    assert len(full) == 4  # 2 agents × 2 batches
    for rule in ("run_batch", "evaluate_batch", "analyze_batch"):
        # the same batch names as in the full study: its outputs are the full study's outputs
        assert keys(by_rule(jobs, rule)) == full, rule
    assert {j.wildcards["configuration"] for j in jobs if j.wildcards} == {CONF}
    assert not by_rule(jobs, "collect")  # a narrowed run stops at its batches' analysis


def test_one_agent_touches_only_its_batches(study, tmp_path):
    jobs = dry_run(study, tmp_path, "--config", "only_agents=mini")
    expected = {b.key for b in batches_of(study) if b.agent == "mini"}
    assert len(expected) == 7
    for rule in ("run_batch", "evaluate_batch", "analyze_batch"):
        assert keys(by_rule(jobs, rule)) == expected, rule


def test_one_task_runs_its_runs_only_in_batches_of_their_own(study, tmp_path):
    task = study["tasks"]["ids"][1]
    jobs = dry_run(study, tmp_path, "--config", f"only_tasks={task}")
    narrowed = batches_of(study, only_tasks=task)
    assert keys(by_rule(jobs, "run_batch")) == {b.key for b in narrowed}
    # packed: per agent, its runs of every configuration in one batch job (batch_size allowing)
    size = study["execution"]["batch_size"]
    per_agent = {a: sum(len(b.runs) for b in narrowed if b.agent == a) for a in ("mini", "trae")}
    assert len(narrowed) == sum(-(-n // size) for n in per_agent.values())  # as few as batch_size allows
    assert all(b.configuration == "only-tasks" for b in narrowed)
    assert all(r.task == task for b in narrowed for r in b.runs)
    full = batches_of(study)
    # fresh batch names (a batch of the full study holds other tasks too) ...
    assert not {b.key for b in narrowed} & {b.key for b in full}
    # ... over the same runs, whose run directories the full study then finds finished
    assert {r.run_id for b in narrowed for r in b.runs} == {
        r.run_id for b in full for r in b.runs if r.task == task
    }


def test_one_configuration_of_one_agent(study, tmp_path):
    jobs = dry_run(study, tmp_path, "--config", f"only={CONF}", "only_agents=trae")
    assert keys(by_rule(jobs, "run_batch")) == {b.key for b in batches_of(study)
                                                if b.agent == "trae" and b.configuration == CONF}


def _finish(results: Path, key: str, names: tuple[str, ...], mtime: float = 1_700_000_000.0) -> None:
    """Write a batch's outputs in pipeline order (each newer than the one before)."""
    d = results / "batches" / key
    d.mkdir(parents=True, exist_ok=True)
    for i, name in enumerate(names):
        (d / name).write_text("{}")
        os.utime(d / name, (mtime + i, mtime + i))


def test_resume_after_a_failure_redoes_only_what_is_unfinished(study, tmp_path):
    """After an interrupted invocation the same command lists only unfinished work: batches
    whose agent job failed (run, evaluate, analyze), batches whose evaluation failed
    (evaluate, analyze), and the study's datasets; never a finished batch."""
    results = Path(study["study"]["results_dir"])
    batches = sorted(b.key for b in batches_of(study))
    done, evaluated_missing, failed = batches[:9], batches[9:12], batches[12:]
    for key in done:
        _finish(results, key, BATCH_OUTPUTS)
    for key in evaluated_missing:
        _finish(results, key, BATCH_OUTPUTS[:1])  # the agent batch finished, its evaluation died

    jobs = dry_run(study, tmp_path)
    assert keys(by_rule(jobs, "run_batch")) == set(failed)
    assert keys(by_rule(jobs, "evaluate_batch")) == set(evaluated_missing) | set(failed)
    assert keys(by_rule(jobs, "analyze_batch")) == set(evaluated_missing) | set(failed)
    assert len(by_rule(jobs, "collect")) == 1

    # the same command once everything is finished: nothing to do
    for key in batches:
        _finish(results, key, BATCH_OUTPUTS)
    jobs = dry_run(study, tmp_path, "--until", "analyze_batch")
    assert not [j for j in jobs if j.rule in ("run_batch", "evaluate_batch", "analyze_batch")]

