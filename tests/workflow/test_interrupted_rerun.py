"""An interrupted forced rerun never looks finished (issue 25, items 1 and 2), end to end.

The demo pipeline on a narrowed study (mini-text, one task, the baseline twice and one deletion
configuration: three runs in two batches) runs once to its tables. Then the forced rerun of the
issue (``--config force_rerun=true --forcerun run_batch``) is interrupted with Ctrl-C — SIGINT
to the whole process group, as a terminal sends it — as soon as one run has been redone. It
prints no traceback and leaves no bare ``error:`` in any log; the redone run's batch no longer
claims an evaluation or analysis of the runs it replaced; and the next plain invocation does
not say "Nothing to be done": it evaluates and analyses again what was redone and ends in
datasets, statistics, tables and figures byte-identical to the uninterrupted run's.

The other stages and signals are shown where they are cheaper: what Snakemake does after each
stage's interruption (tests/workflow/test_stale_outputs.py, dry runs), a batch stopped by
SIGINT, SIGTERM or SIGKILL (tests/runner/test_interrupted_batch.py), SIGKILL inside
evaluation, collection and the tables (tests/test_kill_resume.py).
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from forgetting.foundation.layout import RUN_JSON, Layout
from forgetting.study.config import load_study
from forgetting.study.plan import plan_batches
from forgetting_testkit.workflow_runs import finish, outputs, snakemake, three_run_study

pytestmark = pytest.mark.slow

#: what the evaluation and the analysis write beside a batch's runs.json (forgetting.foundation.layout.BATCH_DOWNSTREAM)
BATCH_DOWNSTREAM = ("eval.json", "summary.parquet", "calls.parquet", "tool_calls.parquet", "run_costs.parquet",
                    "timings.parquet")







def test_a_forced_rerun_stopped_by_ctrl_c_is_completed_by_the_plain_command(tmp_path):
    config = three_run_study(tmp_path, tmp_path / "scratch")
    finish(snakemake(config))
    study = load_study(config)
    layout = Layout(study.results_dir)
    reference = outputs(layout.results)
    assert any(name.startswith("tables/") for name in reference)
    batches = plan_batches(study)
    run_files = {r.run_id: layout.run_dir(r.run_id) / RUN_JSON for b in batches for r in b.runs}
    before = {rid: p.stat().st_mtime_ns for rid, p in run_files.items()}

    proc = snakemake(config, "--config", "force_rerun=true", "--forcerun", "run_batch")
    deadline = time.monotonic() + 600
    while not any(p.is_file() and p.stat().st_mtime_ns != before[rid] for rid, p in run_files.items()):
        assert proc.poll() is None, proc.communicate()[0][-4000:]
        assert time.monotonic() < deadline, "no run was redone in time"
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGINT)
    interrupted, _ = proc.communicate(timeout=300)
    assert proc.returncode != 0
    assert "Traceback" not in interrupted and "KeyboardInterrupt" not in interrupted, interrupted[-4000:]
    bare = [str(p) for p in (layout.results / "logs").rglob("*.log")
            if any(line.strip() == "error:" for line in p.read_text().splitlines())]
    assert bare == []

    mid = {rid: p.stat().st_mtime_ns for rid, p in run_files.items()}  # no run is lost: all finished
    redone = {rid for rid in run_files if mid[rid] != before[rid]}
    assert redone
    for batch in batches:
        if redone & {r.run_id for r in batch.runs}:
            # a redone run invalidates its batch's evaluation and analysis, and its own evaluation
            d = layout.batch_dir(batch.key)
            assert [n for n in ("runs.json", *BATCH_DOWNSTREAM) if (d / n).exists()] == []
            assert not any((layout.run_dir(rid) / "eval.json").exists() for rid in redone & {
                r.run_id for r in batch.runs})

    out = finish(snakemake(config))
    assert "Nothing to be done" not in out
    for rule in ("run_batch", "evaluate_batch", "analyze_batch", "collect", "stats", "tables"):
        assert f"rule {rule}:" in out, rule
    # the plain command keeps every finished run: the redone ones as well as the others
    assert {rid: p.stat().st_mtime_ns for rid, p in run_files.items()} == mid
    # every redone run is evaluated again, and the tables describe the runs on disk
    assert all((layout.run_dir(rid) / "eval.json").is_file() for rid in run_files)
    now = outputs(layout.results)
    assert sorted(now) == sorted(reference)
    assert [name for name in reference if reference[name] != now[name]] == []
    # and then it is finished
    assert "Nothing to be done" in finish(snakemake(config, "-n"))
