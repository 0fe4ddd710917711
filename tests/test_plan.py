import pyarrow.parquet as pq
import pytest

from forgetting.records.schemas import PLAN_SCHEMA
from forgetting.study.config import load_study
from forgetting.study.plan import derive_seed, parse_run_id, plan_batches, plan_runs, summarize


@pytest.fixture(scope="module")
def paper(request):
    from forgetting_testkit.checkout import ROOT

    return load_study(ROOT / "config" / "config.yaml")


def test_paper_plan_numbers(paper):
    # the paper's 9,400 runs plus 7 policies beyond the paper × 2 agents × 100 tasks
    s = summarize(paper)
    assert (s.runs, s.configurations, s.evaluations, s.agents, s.tasks) == (9400, 42, 84, 2, 100)
    assert sum(d.is_paper for d in paper.configurations) == 42


def test_runs_per_configuration_and_repeats(paper):
    runs = plan_runs(paper)
    baseline = [r for r in runs if r.configuration == "baseline"]
    assert len(baseline) == 2 * 100 * 5
    assert sorted({r.repeat for r in baseline}) == [1, 2, 3, 4, 5]
    deletion = [r for r in runs if r.configuration != "baseline"]
    assert len(deletion) == 8400 and {r.repeat for r in deletion} == {1}
    ids = [r.run_id for r in runs]
    assert len(set(ids)) == len(ids)
    assert parse_run_id(ids[0]) == (runs[0].agent, runs[0].configuration, runs[0].task, runs[0].repeat)


def test_seeds_are_derived_from_study_seed_and_run_id(paper):
    runs = plan_runs(paper)
    assert all(r.seed == derive_seed(paper.seed, r.run_id) for r in runs)
    assert len({r.seed for r in runs}) == len(runs)
    assert derive_seed(1, "mini/baseline/x/1") != derive_seed(2, "mini/baseline/x/1")
    assert plan_runs(paper)[17].seed == runs[17].seed  # stable between calls


def test_batches_hold_one_agent_and_configuration_and_cover_every_run(paper):
    runs = plan_runs(paper)
    batches = plan_batches(paper, runs)
    assert len(batches) == 94  # 84 evaluations of 100 runs + 2 agents × 500 baseline runs / 100
    seen = []
    for b in batches:
        assert {(r.agent, r.configuration) for r in b.runs} == {(b.agent, b.configuration)}
        assert len(b.runs) <= 100
        seen += [r.run_id for r in b.runs]
    assert sorted(seen) == sorted(r.run_id for r in runs)
    assert len({b.key for b in batches}) == len(batches)


def test_a_filtered_plan_never_reuses_a_batch_name_with_other_runs(repo_root):
    full = {b.key: b for b in plan_batches(load_study(repo_root / "config/config.yaml"))}
    task = load_study(repo_root / "config/config.yaml").tasks[3]
    one = plan_batches(load_study(repo_root / "config/config.yaml", {"only_tasks": [task]}))
    for b in one:
        if b.key in full:
            assert [r.run_id for r in full[b.key].runs] == [r.run_id for r in b.runs]


def test_plan_cli_prints_summary_and_writes_run_table(run_cli, tmp_path):
    out = tmp_path / "runs.parquet"
    proc = run_cli("plan", "config/config.yaml", "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("9400 runs · 42 configurations · 84 evaluations · 2 agents · 100 tasks")
    table = pq.read_table(out)
    assert table.schema.equals(PLAN_SCHEMA)
    assert table.num_rows == 9400


def test_only_narrows_to_one_configuration(run_cli):
    proc = run_cli("plan", "config/config.yaml", "--set", "only=delayed-turn-tool_output-50")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("200 runs · 1 configuration · 2 evaluations")


def test_the_policies_overlay_adds_1400_runs_and_keeps_the_paper_runs(run_cli, repo_root):
    paper = {r.run_id: r.seed for r in plan_runs(load_study(repo_root / "config/config.yaml"))}
    both = load_study([repo_root / "config/config.yaml", repo_root / "config/policies.yaml"])
    runs = {r.run_id: r.seed for r in plan_runs(both)}
    assert len(runs) == 10800 and len(both.deletion_configurations) == 49
    assert {k: runs[k] for k in paper} == paper  # the same runs, the same seeds: nothing is redone
    proc = run_cli("plan", "config/config.yaml", "config/policies.yaml")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("10800 runs · 49 configurations · 98 evaluations · 2 agents · 100 tasks")


def test_plan_counts_one_of_a_kind_in_the_singular(run_cli):
    # one agent, one task, one configuration (issue 27, item 8: "1 agents", "1 tasks")
    proc = run_cli("plan", "config/config.yaml", "--set", "only=delayed-turn-tool_output-50",
                   "--set", 'agents=["mini"]', "--set", 'tasks={"ids": ["django__django-11099"]}')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("1 run · 1 configuration · 1 evaluation · 1 agent · 1 task · 1 batch\n")
    assert "1 agents" not in proc.stdout and "1 tasks" not in proc.stdout and "1 batch jobs" not in proc.stdout
