"""The ``run_batch`` rule: Snakemake runs every run of a (small) demo study through the runner,
a second invocation has nothing to do, and only a vLLM study asks for a GPU."""

from __future__ import annotations

import json
import subprocess

import pytest

from forgetting.foundation.layout import RUN_JSON, Layout
from forgetting.study.config import load_study
from forgetting.study.plan import plan_batches, plan_runs
from forgetting_testkit.checkout import ROOT, bin_path, cli_env
from forgetting_testkit.runner import FAKE_VLLM_MODEL, write_study


def _snakemake(config, *args, timeout=600):
    return subprocess.run(
        [bin_path("snakemake"), "--cores", "2", "--configfile", str(config), *args],
        cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=timeout,
    )


@pytest.mark.slow
def test_snakemake_runs_every_run_of_the_study_once(tmp_path):
    config = write_study(tmp_path, agents=["mini", "mini-text"],
                         configurations={"names": ["immediate-turn-tool_output-100"]})
    study = load_study(config)
    done = _snakemake(config, "--until", "run_batch")
    assert done.returncode == 0, done.stderr[-3000:]
    assert (done.stdout + done.stderr).count("rule run_batch:") == 4
    layout = Layout(study.results_dir)
    runs = plan_runs(study)
    assert len(runs) == 4
    for run in runs:
        assert json.loads((layout.run_dir(run.run_id) / RUN_JSON).read_text())["run_id"] == run.run_id
    for batch in plan_batches(study):
        manifest = json.loads((layout.batch_dir(batch.key) / "runs.json").read_text())
        assert sorted(manifest["runs"]) == sorted(r.run_id for r in batch.runs)
        assert (layout.batch_dir(batch.key) / "model_server.log").is_file()
    again = _snakemake(config, "--until", "run_batch")
    assert again.returncode == 0 and "rule run_batch:" not in again.stdout + again.stderr  # no job: all done


@pytest.mark.parametrize(("model", "gpu"), [(None, False), (FAKE_VLLM_MODEL, True)])
def test_only_a_vllm_study_asks_for_a_gpu(tmp_path, model, gpu):
    config = write_study(tmp_path, **({"model": model} if model else {}))
    done = _snakemake(config, "-n", "--until", "run_batch", timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    from forgetting.run.gpu_time import batch_runtime_min
    from forgetting_testkit.dryrun import by_rule, parse_jobs

    study = load_study(config)
    jobs = by_rule(parse_jobs(done.stdout), "run_batch")
    assert jobs
    for job in jobs:  # each batch's time limit from its number of runs (the throughput model's worst case)
        runs = len(next(b for b in plan_batches(study) if b.name == job.wildcards["batch"]).runs)
        assert job.resources["runtime"] == str(batch_runtime_min(study, runs))
        assert ("gpu" in job.resources) == gpu
    # a vLLM study's batches wait for the GPU partition's preflight; the scripted one has none
    assert bool(by_rule(parse_jobs(done.stdout), "preflight_gpu")) == gpu
