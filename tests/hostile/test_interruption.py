"""Hostile inputs of the workflow after an interruption (issue 25, items 1 to 3), counted in the
shared tally (tests/hostile/conftest.py):

* ``regenerate=true`` over run outputs that are not all there — none at all (a fresh checkout, a
  replication package not yet placed), a run directory without ``run.json`` or without
  ``eval.json`` (a run redone by an interrupted forced rerun), an ``eval.json`` that is a
  directory: one ``error:`` line before any job, naming what is missing and what to do, no job
  started and nothing changed (it ran 94 empty analyses and wrote empty tables before);
* a workflow job or a batch stopped by Ctrl-C or SIGTERM: one line saying so, no traceback, and
  no bare ``error:`` in its log.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from forgetting_testkit.checkout import ROOT, bin_path, cli_env
from forgetting_testkit.hostile import Outcome, changed, snapshot

pytestmark = pytest.mark.slow


def regenerate(config: Path) -> Outcome:
    """``snakemake -n --config regenerate=true`` as a user types it (a dry run: it lists what it
    would start; a check that stops it stops the real one the same way, before any job)."""
    argv = [bin_path("snakemake"), "-n", "--cores", "2", "--configfile", str(config), "--config", "regenerate=true"]
    proc = subprocess.run(argv, cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=300)
    outcome = Outcome(argv, proc.returncode, proc.stdout, proc.stderr)
    if "Traceback (most recent call last)" in proc.stderr + proc.stdout:
        outcome.traceback = proc.stderr + proc.stdout
    return outcome


def _no_runs(study: Path) -> str:
    shutil.rmtree(study / "runs")
    return "none of the 8 planned runs has outputs in"


def _no_run_record(study: Path) -> str:
    record = sorted(study.glob("runs/*/*/*/*/run.json"))[0]
    record.unlink()
    return f"1 have no run record (first: {record})"


def _no_evaluation(study: Path) -> str:
    report = sorted(study.glob("runs/*/*/*/*/eval.json"))[-1]
    report.unlink()
    return f"1 have no evaluation (first: {report})"


def _evaluation_a_directory(study: Path) -> str:
    report = sorted(study.glob("runs/*/*/*/*/eval.json"))[0]
    report.unlink()
    report.mkdir()
    return f"1 have no evaluation (first: {report})"


CASES = {
    "no run outputs at all": _no_runs,
    "a run without run.json": _no_run_record,
    "a redone run without eval.json": _no_evaluation,
    "eval.json a directory": _evaluation_a_directory,
}


@pytest.mark.parametrize("name", list(CASES))
def test_regeneration_over_missing_run_outputs_stops_before_any_job(world, tmp_path, tally, name):
    study = tmp_path / "study"
    shutil.copytree(world.study, study, symlinks=True)
    cfg = yaml.safe_load((study / "study.yaml").read_text())
    cfg["study"]["results_dir"] = str(study)
    (study / "study.yaml").write_text(yaml.safe_dump(cfg))
    says = CASES[name](study)
    before = snapshot(study, world.study)
    outcome = regenerate(study / "study.yaml")
    outcome.changed = changed(before, snapshot(study, world.study))
    more = [] if says in outcome.stderr else [f"the error does not say {says!r}: {outcome.stderr[-1000:]}"]
    more += [f"a job was listed: {outcome.stdout[-500:]}"] if "rule analyze_batch" in outcome.stdout else []
    found = tally.record("workflow: regenerate=true", outcome, expect="error", more=more)
    assert not found, "; ".join(found)


DRIVER = """
import os, signal, sys
from types import SimpleNamespace
from forgetting.foundation.stagelog import StageLog
from forgetting.workflow import job
with job(SimpleNamespace(log=[sys.argv[1]])), StageLog(sys.argv[1]) as out:
    out.line("working")
    os.kill(os.getpid(), getattr(signal, sys.argv[2]))
    signal.pause()
"""


#: SIGTERM as the batch job turns it into an exit (forgetting.run.batch.Terminated: status 128 + 15)
TERM = """
def _exit(signum, frame):
    raise SystemExit(128 + signum)
signal.signal(signal.SIGTERM, _exit)
"""


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM"])
def test_a_workflow_job_stopped_by_a_signal_says_so_in_one_line(tmp_path, tally, how):
    """The body of every rule script (forgetting.workflow.job) under Ctrl-C; and SIGTERM as a
    batch turns it into an exit (forgetting.run.batch)."""
    log = tmp_path / "stage.log"
    code = DRIVER if how == "SIGINT" else DRIVER.replace("with job(", TERM + "with job(")
    proc = subprocess.run([sys.executable, "-c", code, str(log), how], cwd=ROOT, env=cli_env(),
                          capture_output=True, text=True, timeout=60)
    # a stopped job's status is the signal's (130, 143), not 0 or 2: checked here, not by the tally's rule
    outcome = Outcome([how], None, proc.stdout, proc.stderr)
    if "Traceback (most recent call last)" in proc.stderr:
        outcome.traceback = proc.stderr
    more = []
    expected = {"SIGINT": 130, "SIGTERM": 143}[how]
    if proc.returncode != expected:
        more.append(f"status {proc.returncode}, not {expected}")
    said = [line for line in proc.stderr.splitlines() if line.strip()]
    if len(said) > 1:
        more.append(f"more than one line on stderr: {said}")
    lines = log.read_text().splitlines()
    if not lines or "the next invocation redoes what did not finish" not in lines[-1]:
        more.append(f"the log ends in {lines[-1:]!r}")
    found = tally.record("workflow: a job stopped by a signal", outcome, expect="any", more=more)
    assert not found, "; ".join(found)


WRITING = """
import os, signal, sys
from pathlib import Path
from types import SimpleNamespace
from forgetting.foundation.atomic import atomic_path
from forgetting.workflow import job
with job(SimpleNamespace(log=[sys.argv[1]])):
    with atomic_path(Path(sys.argv[2])) as tmp:
        tmp.write_text("half a dataset")
        os.kill(os.getpid(), signal.SIGTERM)
        signal.pause()
"""


def test_sigterm_during_a_jobs_atomic_write_leaves_no_temporary_file(tmp_path, tally):
    """``signal during a write``: a workflow job (forgetting.workflow.job, as collect runs in it) given
    SIGTERM — Snakemake or Slurm cancelling it, ``kill -TERM`` of the group — while an atomic write
    is under way: the write's temporary file is removed, its target is not made, the job says so in
    one line and ends with status 143 (SIGTERM's default action ended it at once and left the file)."""
    log, target = tmp_path / "collect.log", tmp_path / "datasets" / "runs.parquet"
    target.parent.mkdir()
    proc = subprocess.run([sys.executable, "-c", WRITING, str(log), str(target)], cwd=ROOT, env=cli_env(),
                          capture_output=True, text=True, timeout=60)
    outcome = Outcome(["SIGTERM during a write"], None, proc.stdout, proc.stderr)
    if "Traceback (most recent call last)" in proc.stderr:
        outcome.traceback = proc.stderr
    more = [f"status {proc.returncode}, not 143"] if proc.returncode != 143 else []
    left = sorted(p.name for p in target.parent.iterdir())
    more += [f"left in the output's folder: {left}"] if left else []
    if proc.stderr.strip() != "stopped (SIGTERM); the next invocation redoes what did not finish":
        more.append(f"stderr: {proc.stderr.strip()[-500:]!r}")
    found = tally.record("workflow: a job stopped by a signal", outcome, expect="any", more=more,
                         klass="signal during an atomic write")
    assert not found, "; ".join(found)
