"""A forced batch stopped by SIGINT (Ctrl-C, to the process group as a terminal sends it),
SIGTERM (Snakemake cancelling it, Slurm ending it) or SIGKILL once it has redone a run
(issue 25, items 1 and 2): no traceback, no bare ``error:`` in its log, the batch's manifest,
evaluation manifest and analysis tables (which describe the runs it replaced) are gone, and so
are the study's datasets, statistics, tables, figures and report (no table describes runs no
longer on disk; nothing outside the results directory is touched), every run is still
finished, and the plain invocation after it keeps every run and writes the manifest of the
runs on disk. That the plain workflow then makes the study's outputs again:
tests/workflow/test_stale_outputs.py."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from forgetting.foundation.layout import RUN_JSON, Layout
from forgetting.foundation.stagelog import StageLog
from forgetting.records.schemas import DATASETS
from forgetting.run import run_batch
from forgetting.run.batch import BatchRunner
from forgetting.study.plan import PACKED, plan_batches
from forgetting_testkit.checkout import ROOT, cli_env
from forgetting_testkit.runner import batch_of, study_at, write_study

pytestmark = pytest.mark.slow

#: what the evaluation and the analysis write beside a batch's runs.json (forgetting.foundation.layout.BATCH_DOWNSTREAM)
BATCH_DOWNSTREAM = ("eval.json", "summary.parquet", "calls.parquet", "tool_calls.parquet", "run_costs.parquet",
                    "timings.parquet")


REPEATS = {"baseline": 2, "deletion": 1}


def study_outputs(layout: Layout, outside) -> list:
    """The study's collected datasets, statistics, tables, figures and report as a finished
    study has them (of the runs before), with a table that links out of the results directory
    and a figures directory that is a symlink to one elsewhere; the files they link to."""
    files = [*(layout.dataset(name) for name in DATASETS), layout.stats / "rates.parquet",
             layout.tables / "policies_comparison.csv", layout.tables / "policies_comparison.tex",
             layout.report / "index.html", layout.results / "report.html"]
    for path in files:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("of the runs before")
    outside.mkdir()
    (outside / "kept.csv").write_text("not the study's")
    (outside / "figure.pdf").write_text("not the study's")
    (layout.tables / "linked.csv").symlink_to(outside / "kept.csv")
    layout.figures.symlink_to(outside, target_is_directory=True)
    return [*files, layout.tables / "linked.csv", layout.figures]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """mini on one demo task, the baseline twice: the batch run once, and its manifest."""
    tmp = tmp_path_factory.mktemp("finished")
    study = study_at(tmp, repeats=REPEATS)
    batch = batch_of(study, "mini", "baseline")
    manifest = Layout(study.results_dir).batch_dir(batch.key) / "runs.json"
    return tmp / "results", run_batch(study, batch, manifest=manifest, echo=False)


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["SIGINT", "SIGTERM", "SIGKILL"])
def test_a_forced_batch_stopped_after_its_first_redone_run(finished, tmp_path, how):
    results, first = finished
    shutil.copytree(results, tmp_path / "results", symlinks=True)
    config = write_study(tmp_path, repeats=REPEATS)
    study = study_at(tmp_path, repeats=REPEATS)
    batch = batch_of(study, "mini", "baseline")
    layout = Layout(study.results_dir)
    batch_dir = layout.batch_dir(batch.key)
    manifest = batch_dir / "runs.json"
    for name in BATCH_DOWNSTREAM:  # what the evaluation and the analysis left of the runs as they were
        (batch_dir / name).write_text("of the runs before")
    study_level = study_outputs(layout, tmp_path / "elsewhere")
    runs = {r.run_id: layout.run_dir(r.run_id) / RUN_JSON for r in batch.runs}
    before = {rid: p.stat().st_mtime_ns for rid, p in runs.items()}

    log = tmp_path / "forced.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "forgetting", "run-batch", str(config), "--batch", batch.key, "--force", "--log",
         str(log)], cwd=ROOT, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    deadline = time.monotonic() + 300
    while not any(p.is_file() and p.stat().st_mtime_ns != before[rid] for rid, p in runs.items()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no run was redone in time"
        time.sleep(0.05)
    os.killpg(proc.pid, how)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    if how == signal.SIGINT:
        assert err.strip().splitlines()[-1] == "interrupted"
    lines = log.read_text().splitlines()
    assert not [line for line in lines if line.strip() == "error:" or line.startswith("error: 1")]
    if how != signal.SIGKILL:  # the log says how the batch stopped, and what comes next
        assert lines[-1] == {signal.SIGINT: "interrupted (SIGINT)", signal.SIGTERM: "stopped (SIGTERM)"}[how] + (
            "; the next invocation redoes what did not finish")
    assert [n for n in ("runs.json", *BATCH_DOWNSTREAM) if (batch_dir / n).exists()] == []
    # no study-level output of the runs before is left (the workflow's targets: made again)
    assert [str(p) for p in study_level if os.path.lexists(p)] == []
    for path in (layout.datasets, layout.stats, layout.tables, layout.figures, layout.report):
        assert not os.path.lexists(path), path
    assert sorted(p.name for p in (tmp_path / "elsewhere").iterdir()) == ["figure.pdf", "kept.csv"]
    assert all(p.read_text() == "not the study's" for p in (tmp_path / "elsewhere").iterdir())
    assert all(p.is_file() for p in runs.values())  # no finished run is lost

    mid = {rid: p.stat().st_mtime_ns for rid, p in runs.items()}
    again = run_batch(study, batch, manifest=manifest, echo=False)
    assert {rid: p.stat().st_mtime_ns for rid, p in runs.items()} == mid  # every run kept
    assert again["runs"] == first["runs"] == json.loads(manifest.read_text())["runs"]


def test_a_batch_narrowed_to_one_task_also_invalidates_the_whole_studys_batch_of_its_runs(tmp_path):
    """``only_tasks`` packs the task's runs into batches of their own (``{agent}/only-tasks/``):
    redoing them makes every whole-study batch that holds one of them stale too (its runs.json
    goes, so the plain invocation redoes it and everything after); a batch of other runs (here:
    the other agent's) is left alone."""
    sections = {"agents": ["mini", "mini-text"], "tasks": {"ids": ["demo__confkit-1", "demo__ledger-1"]},
                "repeats": REPEATS, "configurations": {"names": ["delayed-turn-tool_output-100"]}}
    whole = study_at(tmp_path, **sections)
    narrowed = study_at(tmp_path, **sections, only_tasks="demo__confkit-1", only_agents="mini")
    (small,) = plan_batches(narrowed)
    assert small.configuration == PACKED
    holding = [batch_of(whole, "mini", c) for c in ("baseline", "delayed-turn-tool_output-100")]
    other = batch_of(whole, "mini-text", "baseline")
    assert all({r.run_id for r in small.runs} & {r.run_id for r in b.runs} for b in holding)
    assert not {r.run_id for r in small.runs} & {r.run_id for r in other.runs}
    layout = Layout(whole.results_dir)
    for key in (*(b.key for b in holding), small.key, other.key):
        layout.batch_dir(key).mkdir(parents=True)
        for name in ("runs.json", *BATCH_DOWNSTREAM):
            (layout.batch_dir(key) / name).write_text("of the runs before")
    runner = BatchRunner(narrowed, small, narrowed.runner, StageLog(None),
                         layout.batch_dir(small.key) / "runs.json")
    runner._invalidate_downstream()  # as the batch does before it replaces its first run directory
    for key in (*(b.key for b in holding), small.key):
        assert sorted(p.name for p in layout.batch_dir(key).iterdir()) == [], key
    assert sorted(p.name for p in layout.batch_dir(other.key).iterdir()) == sorted(("runs.json", *BATCH_DOWNSTREAM))
