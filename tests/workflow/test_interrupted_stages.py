"""Interrupting the workflow at every stage, by every signal (issue 25, item 1): the next plain
invocation redoes exactly what is stale, and no table ever describes runs no longer on disk.

The demo pipeline on a narrowed study (mini-text, one task, the baseline twice and one deletion
configuration: three runs in two batches) runs once to its tables: the reference. Each cell
starts from a copy of it and runs the issue's forced rerun (``--config force_rerun=true
--forcerun run_batch``: every stage runs again), which a fault hook
(``FORGETTING_SIGNAL_AT=CHECKPOINT:SIGNAL``, :mod:`forgetting.foundation.faults`) stops at one
stage — a run redone, an evaluation written, a batch's analysis, a dataset, a statistics file, a
table — by sending the signal to the whole process group: SIGINT as a terminal's Ctrl-C does,
SIGTERM as ``kill -TERM -PGID`` or a session's end does, SIGKILL as ``kill -9`` of all of it —
once (the first job to reach the checkpoint sends it; two batches run side by side).

Then, for each cell:

* no traceback and no bare ``error:`` in any log; a job stopped by SIGINT or SIGTERM says so and
  leaves no temporary file of a write it was making;
* nothing on disk describes a run that was redone since it was written: each evaluation is
  newer than its run, each batch's manifests and analysis newer than its runs, each dataset,
  statistics file, table and figure newer than every run;
* the plain command (no ``--unlock`` after SIGKILL: the lock a killed workflow leaves is
  removed, forgetting.foundation.snakemake_lock) does not say "Nothing to be done", redoes no
  finished run, keeps every evaluation that is current, and ends in datasets, statistics,
  tables and figures byte-identical to the reference, with no temporary file left anywhere (a
  SIGKILL's included); after it, nothing is left to do.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from forgetting.foundation.faults import ONCE_ENV, SIGNAL_ENV
from forgetting.foundation.layout import BATCH_DOWNSTREAM, EVAL_JSON, RUN_JSON, Layout
from forgetting.study.config import load_study
from forgetting.study.plan import plan_batches
from forgetting_testkit.workflow_runs import finish, outputs, snakemake, three_run_study

pytestmark = pytest.mark.slow

#: stage → the checkpoint its interruption lands on (the first of them in the forced rerun)
STAGES = {
    "run": "run.finalized",
    "evaluate": "evaluate.report",
    "analyze": "analyze.output",
    "collect": "collect.dataset",
    "stats": "stats.output",
    "tables": "tables.table",
}
SIGNALS = ("SIGINT", "SIGTERM", "SIGKILL")
#: the cells every run of the suite holds: each stage by one signal, each signal at two stages
#: (the whole 6 × 3 matrix, about three times as long, with FORGETTING_INTERRUPT_MATRIX=full)
DIAGONAL = {("run", "SIGKILL"), ("evaluate", "SIGINT"), ("analyze", "SIGTERM"),
            ("collect", "SIGKILL"), ("stats", "SIGTERM"), ("tables", "SIGINT")}
FULL_MATRIX = os.environ.get("FORGETTING_INTERRUPT_MATRIX") == "full"


def cells() -> list:
    return [pytest.param(stage, how, marks=() if FULL_MATRIX or (stage, how) in DIAGONAL else
                         pytest.mark.skip(reason="off the diagonal: FORGETTING_INTERRUPT_MATRIX=full runs "
                                                 "every stage by every signal"))
            for stage in STAGES for how in SIGNALS]




@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[Path, dict[str, bytes]]:
    """The uninterrupted study's results directory and what it reports."""
    tmp = tmp_path_factory.mktemp("reference")
    config = three_run_study(tmp, tmp_path_factory.getbasetemp() / "scratch")
    finish(snakemake(config))
    results = Layout(load_study(config).results_dir).results
    return results, outputs(results)


def _mtimes(paths) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in paths if p.is_file()}


def stale_claims(layout: Layout, batches) -> list[str]:
    """Every file that claims to describe a run redone since it was written."""
    wrong = []
    runs = {r.run_id: layout.run_dir(r.run_id) for b in batches for r in b.runs}
    made = {rid: (d / RUN_JSON).stat().st_mtime_ns for rid, d in runs.items() if (d / RUN_JSON).is_file()}
    for rid, d in runs.items():
        report = d / EVAL_JSON
        if report.is_file() and (rid not in made or report.stat().st_mtime_ns < made[rid]):
            wrong.append(f"{report}: older than its run")
    for batch in batches:
        newest = max((made.get(r.run_id, 0) for r in batch.runs), default=0)
        for path in (layout.batch_dir(batch.key) / name for name in BATCH_DOWNSTREAM):
            if path.is_file() and path.stat().st_mtime_ns < newest:
                wrong.append(f"{path}: older than a run of its batch")
    newest = max(made.values(), default=0)
    for top in layout.study_downstream():
        for path in sorted([top, *top.rglob("*")] if top.is_dir() else [top]):
            if path.is_file() and path.stat().st_mtime_ns < newest:
                wrong.append(f"{path}: older than a run")
    return wrong


@pytest.mark.parametrize(("stage", "how"), cells())
def test_an_interrupted_stage_is_redone_by_the_plain_command(reference, tmp_path_factory, tmp_path, stage, how):
    ref_results, expected = reference
    config = three_run_study(tmp_path, tmp_path_factory.getbasetemp() / "scratch")
    study = load_study(config)
    layout = Layout(study.results_dir)
    shutil.copytree(ref_results, layout.results, symlinks=True)
    batches = plan_batches(study)

    proc = snakemake(config, "--config", "force_rerun=true", "--forcerun", "run_batch",
                     env={SIGNAL_ENV: f"{STAGES[stage]}:{how}", ONCE_ENV: str(tmp_path / "signalled")})
    interrupted, _ = proc.communicate(timeout=900)
    assert proc.returncode != 0, f"the {stage} stage was not interrupted:\n{interrupted[-3000:]}"
    assert "Traceback" not in interrupted and "KeyboardInterrupt" not in interrupted, interrupted[-4000:]
    logs = sorted((layout.results / "logs").rglob("*.log"))
    assert [str(p) for p in logs if any(line.strip() == "error:" for line in p.read_text().splitlines())] == []
    if how != "SIGKILL":
        said = "interrupted (SIGINT)" if how == "SIGINT" else "stopped (SIGTERM)"
        assert said in interrupted + "".join(p.read_text() for p in logs), interrupted[-3000:]
    assert stale_claims(layout, batches) == []
    if how != "SIGKILL":  # a write stopped by SIGINT or SIGTERM removes its temporary file (SIGKILL cannot)
        assert [str(p) for p in layout.results.rglob(".*.tmp")] == [], "temporary files left by a stopped write"

    runs = _mtimes(layout.run_dir(r.run_id) / RUN_JSON for b in batches for r in b.runs)
    current = _mtimes(p.parent / EVAL_JSON for p in runs if (p.parent / EVAL_JSON).is_file())
    out = finish(snakemake(config))
    assert "Nothing to be done" not in out
    assert _mtimes(runs) == runs, "the plain command redid a finished run"
    assert _mtimes(current) == current, "the plain command evaluated a run again whose evaluation was current"
    assert [str(p) for p in layout.results.rglob(".*.tmp")] == [], "temporary files left after the plain command"
    if how == "SIGKILL":
        assert "removed the Snakemake lock a killed workflow of this study left" in out
    now = outputs(layout.results)
    assert sorted(now) == sorted(expected)
    assert [name for name in expected if expected[name] != now[name]] == []
    assert "Nothing to be done" in finish(snakemake(config, "-n"))
