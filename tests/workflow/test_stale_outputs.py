"""What Snakemake sees after an interruption, and after a regeneration (issue 25, items 1 and 3).

Snakemake removes the outputs of a job it interrupts (SIGINT, SIGTERM; a forced or outdated
job's outputs are removed before it starts, so after SIGKILL too). A missing file that is only
the *input* of jobs whose outputs exist reruns nothing: after a forced ``run_batch`` was
interrupted the next plain invocation said "Nothing to be done" over tables of runs that had
been redone since. Every stage's outputs are targets now, so the plain invocation redoes the
interrupted job and everything after it, and nothing else. Shown by dry runs
(``forgetting_testkit.dryrun``) of the small study of tests/workflow/test_partial_reruns.py
with every output on disk in pipeline order; the real thing end to end:
tests/workflow/test_interrupted_rerun.py.

Regeneration (``--config regenerate=true``) works from the run directories on disk: with none
there it stops at once, naming what is missing and where a replication package goes; it keeps
the analysis' input as it is, so neither it nor the plain invocation after it reanalyses a
batch whose analysis is current.

A batch that changes a run removes the study's datasets, statistics, tables and figures with its
own batch files, before it replaces the first run directory: no table describes runs that are
no longer on disk, and the plain command makes them again.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from forgetting.foundation.layout import Layout
from forgetting.foundation.stagelog import StageLog
from forgetting.run.batch import BatchRunner
from forgetting.study.config import study_from_mapping
from forgetting.study.plan import plan_batches
from forgetting_testkit.checkout import ROOT, cli_env
from forgetting_testkit.dryrun import dry_run, small_study, snakemake_cmd
from forgetting_testkit.synth import synthesize

#: each stage's place in the pipeline (a later stage's outputs are newer)
ORDER = {"plan": 0, "run_batch": 1, "evaluate_batch": 2, "analyze_batch": 3, "collect": 4, "stats": 5,
         "tables": 6, "figures": 6}
BATCH_STAGES = ("run_batch", "evaluate_batch", "analyze_batch")
AFTER = ("collect", "stats", "tables", "figures")
T0 = 1_700_000_000


@pytest.fixture(scope="module")
def every_output(tmp_path_factory) -> dict[str, tuple[str, str | None]]:
    """Every output of the small study, relative to its results directory: (rule, batch key)."""
    tmp = tmp_path_factory.mktemp("outputs")
    study = small_study(tmp)
    results = Path(study["study"]["results_dir"])
    files = {}
    for job in dry_run(study, tmp):
        key = job.batch_key if job.wildcards else None
        for out in job.output:  # "… (update)": the datasets, which Snakemake keeps while collect runs
            files[str(Path(out.split(" (")[0]).relative_to(results))] = (job.rule, key)
    return files


def finished(tmp_path: Path, every_output: dict[str, tuple[str, str | None]]) -> tuple[dict, Path]:
    """The small study under ``tmp_path`` with every output on disk, each stage newer than the last."""
    study = small_study(tmp_path)
    results = Path(study["study"]["results_dir"])
    for rel, (rule, _) in every_output.items():
        path = results / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}")
        os.utime(path, (T0 + 10 * ORDER[rule],) * 2)
    return study, results


@pytest.mark.parametrize("stage", [*BATCH_STAGES, "collect", "stats"])
def test_the_plain_command_redoes_the_interrupted_job_and_everything_after_it(tmp_path, every_output, stage):
    """``stage``'s job was interrupted (for one batch, where it is a batch's): its outputs are
    gone. The plain command lists that job, the same batch's later stages, and the study's.
    (The tables and figures were targets before; a finished study has nothing to do:
    tests/workflow/test_interrupted_rerun.py ends with it.)"""
    study, results = finished(tmp_path, every_output)
    key = sorted(k for r, k in every_output.values() if r == "run_batch")[0] if stage in BATCH_STAGES else None
    gone = [rel for rel, (rule, k) in every_output.items() if rule == stage and k == key]
    assert gone
    for rel in gone:
        (results / rel).unlink()
    jobs = [j for j in dry_run(study, tmp_path) if j.rule != "all"]
    later = BATCH_STAGES[BATCH_STAGES.index(stage):] if stage in BATCH_STAGES else ()
    expected = {(rule, key) for rule in later} | {(rule, None) for rule in AFTER[
        AFTER.index(stage) if stage in AFTER else 0:]}
    assert {(j.rule, j.batch_key if j.wildcards else None) for j in jobs} == expected


# -- regeneration --------------------------------------------------------------------------------------
def regenerate(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = snakemake_cmd("--cores", "2", "--configfile", str(config), "--config", "regenerate=true", *args,
                        profiles=())
    return subprocess.run(cmd, cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=600)


def test_regeneration_without_run_outputs_stops_at_once_naming_what_is_missing(tmp_path):
    config = tmp_path / "study.yaml"
    study = small_study(tmp_path)
    config.write_text(yaml.safe_dump(study))
    for args in (("-n",), ()):
        done = regenerate(config, *args)
        errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
        assert done.returncode == 2 and len(errors) == 1, done.stderr[-3000:]
        assert "rule analyze_batch" not in done.stdout + done.stderr
        (line,) = errors
        runs = f"{study['study']['results_dir']}/runs"
        assert f"none of the 24 planned runs has outputs in {runs}/" in line
        assert "replication package's run directories there (AGENT/CONFIGURATION/TASK/REPEAT/" in line
        assert "run without regenerate=true" in line
    assert not (tmp_path / "results" / "batches").exists()


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("regen") / "study"
    synthesize(ROOT / "config/demo.yaml", out, runs=8, workers=2, progress=lambda _: None)
    return out


def test_regeneration_and_the_plain_command_after_it_reanalyse_no_current_batch(synthetic, tmp_path):
    study = tmp_path / "study"
    shutil.copytree(synthetic, study)
    cfg = yaml.safe_load((study / "study.yaml").read_text())
    cfg["study"]["results_dir"] = str(study)
    (study / "study.yaml").write_text(yaml.safe_dump(cfg))
    config = study / "study.yaml"
    done = regenerate(config, "--until", "analyze_batch")
    assert done.returncode == 0, done.stderr[-3000:]
    ran = done.stderr + done.stdout
    assert "rule analyze_batch:" in ran
    assert "rule run_batch:" not in ran and "rule evaluate_batch:" not in ran

    again = regenerate(config, "-n", "--until", "analyze_batch")
    assert again.returncode == 0 and "rule analyze_batch:" not in again.stdout, again.stdout[-3000:]
    plain = subprocess.run(
        snakemake_cmd("-n", "--cores", "2", "--configfile", str(config), "--until", "analyze_batch", profiles=()),
        cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=600)
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert "rule analyze_batch:" not in plain.stdout, plain.stdout[-3000:]


def test_a_batch_that_changes_a_run_leaves_no_study_output_and_the_plain_command_makes_them_again(
        tmp_path, every_output):
    """A forced batch, before it replaces its first run directory, removes what describes its
    runs as they were: its batch files and the study's datasets, statistics, tables and figures.
    Stopped right after that (whatever stops it), no study-level table of the old runs is left,
    and the plain command redoes that batch and everything after it, the study's outputs too."""
    study, results = finished(tmp_path, every_output)
    key = sorted(k for r, k in every_output.values() if r == "run_batch")[0]
    loaded = study_from_mapping(study, source="config", root=ROOT)
    (batch,) = [b for b in plan_batches(loaded) if b.key == key]
    layout = Layout(loaded.results_dir)
    runner = BatchRunner(loaded, batch, loaded.runner, StageLog(None),
                         layout.batch_dir(key) / "runs.json")
    runner._invalidate_downstream()  # as the batch does before it replaces its first run directory
    study_level = [rel for rel, (rule, _) in every_output.items() if rule in AFTER]
    assert {every_output[rel][0] for rel in study_level} == set(AFTER)
    assert [rel for rel in study_level if (results / rel).exists()] == []
    jobs = [j for j in dry_run(study, tmp_path) if j.rule != "all"]
    assert {(j.rule, j.batch_key if j.wildcards else None) for j in jobs} == {
        *((rule, key) for rule in BATCH_STAGES), *((rule, None) for rule in AFTER)}
