"""The scripted stand-in model, driven by real mini-swe-agent in both message styles through the
deletion proxy, resolves most demo tasks when nothing is deleted (evaluated for real)."""

from __future__ import annotations

import subprocess

import pyarrow.parquet as pq
import pytest

from forgetting.demo.tasks import demo_task_ids
from forgetting.foundation.layout import Layout
from forgetting.study.config import load_study
from forgetting_testkit.checkout import ROOT, bin_path, cli_env
from forgetting_testkit.runner import write_study


@pytest.mark.slow
def test_most_demo_tasks_are_resolved_under_the_baseline(tmp_path):
    tasks = demo_task_ids(ROOT / "resources" / "demo" / "tasks")
    assert len(tasks) >= 8
    config = write_study(
        tmp_path,
        agents=["mini", "mini-text"],
        tasks={"ids": tasks},
        repeats={"baseline": 1, "deletion": 1},
        configurations={"names": "none"},
        agent={"turn_cap": 60, "command_timeout_s": 60, "fixed_test_durations": True},
        execution={"concurrency": 1, "scratch_dir": str(tmp_path / "scratch")},
    )
    done = subprocess.run(
        [bin_path("snakemake"), "collect", "--cores", "2", "--configfile", str(config)],
        cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    runs = pq.read_table(Layout(load_study(config).results_dir).dataset("runs")).to_pylist()
    assert len(runs) == 2 * len(tasks)
    for agent in ("mini", "mini-text"):
        mine = [r for r in runs if r["agent"] == agent]
        assert all(r["model_backend"] and "scripted" in r["model_backend"] for r in mine)
        resolved = sum(bool(r["resolved"]) for r in mine)
        assert resolved >= 0.7 * len(tasks), (agent, resolved, [(r["task"], r["eval_status"]) for r in mine])
