"""Determinism and resume of the whole pipeline on a narrowed demo study.

Run A goes from scratch to tables and figures. Run B starts from scratch too but is killed
with SIGKILL (the whole Snakemake process group: scheduler, batch job, model server, agent
runs) as soon as its first agent run has finished; the next invocation completes it, redoing
only what was interrupted. Every dataset but the wall-clock timings, every statistics file,
table and figure of B must equal A's byte for byte.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from forgetting.foundation.layout import RUN_JSON, Layout
from forgetting.study.config import load_study
from forgetting.study.plan import plan_runs
from forgetting_testkit.runner import write_study
from forgetting_testkit.workflow_runs import finish, outputs, snakemake

TASKS = ["demo__confkit-1", "demo__timekit-2"]
CONFIGURATIONS = ["delayed-token-tool_output-50", "immediate-turn-both-100"]


def study_config(tmp: Path, name: str, scratch: Path) -> Path:
    return write_study(
        tmp / name,
        agents=["mini-text"],
        tasks={"ids": TASKS},
        repeats={"baseline": 2, "deletion": 1},
        configurations={"names": CONFIGURATIONS},
        agent={"turn_cap": 40, "command_timeout_s": 60, "fixed_test_durations": True},
        # one scratch directory for both studies: workspace paths show up in tool output
        execution={"concurrency": 1, "scratch_dir": str(scratch)},
        statistics={"resamples": 1000},
    )





@pytest.mark.slow
def test_demo_pipeline_is_byte_identical_and_resumes_after_sigkill(tmp_path):
    scratch = tmp_path / "scratch"
    config_a = study_config(tmp_path, "a", scratch)
    config_b = study_config(tmp_path, "b", scratch)
    finish(snakemake(config_a))

    study_b = load_study(config_b)
    layout_b = Layout(study_b.results_dir)
    runs = plan_runs(study_b)
    assert len(runs) == 8
    proc = snakemake(config_b)
    deadline = time.monotonic() + 600
    while not any((layout_b.run_dir(r.run_id) / RUN_JSON).is_file() for r in runs):
        assert proc.poll() is None, proc.communicate()[0][-4000:]
        assert time.monotonic() < deadline, "no run finished in time"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = {r.run_id: (layout_b.run_dir(r.run_id) / RUN_JSON) for r in runs}
    before = {rid: p.stat().st_mtime_ns for rid, p in finished.items() if p.is_file()}
    assert 0 < len(before) < len(runs)

    # a killed Snakemake leaves its lock behind; the user's next step, as Snakemake says, is --unlock
    finish(snakemake(config_b, "--unlock"))
    finish(snakemake(config_b))
    # the runs finished before the kill were not redone
    assert {rid: finished[rid].stat().st_mtime_ns for rid in before} == before
    for run in runs:
        meta = json.loads(finished[run.run_id].read_text())
        assert meta["run_id"] == run.run_id and meta["seed"] == run.seed

    a, b = outputs(load_study(config_a).results_dir), outputs(study_b.results_dir)
    assert sorted(a) == sorted(b) and any(name.startswith("tables/") for name in a)
    assert [name for name in a if a[name] != b[name]] == []
