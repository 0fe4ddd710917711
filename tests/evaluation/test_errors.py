"""Evaluation errors (issue 15, item 2): a harness failure is never counted silently as unsolved.

``timeout`` and ``error`` are evaluation errors, not outcomes of the run. ``evaluation.on_error``
decides what the statistics make of them: ``fail`` stops before the statistics naming the
runs, the instances and the one command that redoes just their evaluation; ``exclude`` drops
the task from both sides of that evaluation's comparisons; ``unresolved`` counts it as not
solved. Table I shows each row's count and the footnote what was done. Hand cases on the
datasets of forgetting_testkit.hand_study; the end-to-end case on a synthetic study of the demo
tasks in the real on-disk format, evaluated for real by the local backend.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from forgetting.evaluate import evaluate_batch, read_report
from forgetting.foundation.atomic import write_json
from forgetting.foundation.errors import RunOutputError
from forgetting.foundation.layout import Layout
from forgetting.instances.load import load_instances
from forgetting.records.eval_report import (
    EVAL_ERRORS,
    OUTCOMES,
    STATUSES,
    EvalReport,
    is_current,
    patch_digest,
    write_report,
)
from forgetting.report.collect import collect
from forgetting.report.stats.run import compute_statistics
from forgetting.report.tables.build import StatsTables, table1
from forgetting.study.config import load_study
from forgetting.study.plan import plan_batches, run_id
from forgetting.study.statistics import StatsSettings
from forgetting_testkit import evaltask
from forgetting_testkit.checkout import ROOT, bin_path, cli_env
from forgetting_testkit.dryrun import parse_jobs
from forgetting_testkit.evaltask import make_run
from forgetting_testkit.hand_study import DELAYED, IMMEDIATE, runs_table, tool_calls_table
from forgetting_testkit.studies import analyze_batches, place
from forgetting_testkit.synth import synthesize

TASKS = ["A", "B", "C", "D"]
ERRORED = run_id("mini", DELAYED, "A", 1)  # resolved in the hand data


def stats(on_error: str, eval_errors=(ERRORED,), missing=()):
    return compute_statistics(
        runs_table(missing=missing, eval_errors=eval_errors),
        tool_calls_table(),
        None,
        StatsSettings.from_section({"resamples": 300, "seed": 3}, on_error=on_error),
        task_order=TASKS,
        redo_command="forgetting evaluate --errored --config study.yaml",
    )


def effects(out) -> dict[tuple[str, str], dict]:
    return {(r["configuration"], r["metric"]): r for r in out["effects"].to_pylist()}


def summary(out) -> dict[str, dict]:
    return {r["configuration"]: r for r in out["summary"].to_pylist()}


# -- the statuses ------------------------------------------------------------------------------------
def test_timeout_and_error_are_evaluation_errors_and_never_kept_as_current():
    assert set(OUTCOMES) | set(EVAL_ERRORS) == set(STATUSES) and not set(OUTCOMES) & set(EVAL_ERRORS)
    assert EVAL_ERRORS == ("timeout", "error") and "patch_failed" in OUTCOMES  # a patch that fails is unsolved
    patch = "diff --git a/x b/x\n"
    for status in STATUSES:
        report = EvalReport(instance_id="t", backend="local", status=status, resolved=status == "resolved",
                            patch_sha256=patch_digest(patch))
        assert is_current(report, patch=patch, backend="local") == (status in OUTCOMES), status


def test_a_timeout_is_evaluated_again_and_only_names_it_touches(study_file, tmp_path):
    study = load_study(study_file)
    (batch,) = plan_batches(study)
    runs = batch.runs
    dirs = [make_run(study, runs[0], evaltask.patch("gold")), make_run(study, runs[1], evaltask.patch("gold"))]
    manifest = tmp_path / "eval-manifest.json"
    evaluate_batch(study, batch, manifest=manifest)
    for d in dirs:
        report = read_report(d / "eval.json")
        report.status, report.resolved = "timeout", False
        write_report(d / "eval.json", report)
    kept = (dirs[1] / "eval.json").read_bytes()
    doc = evaluate_batch(study, batch, manifest=manifest, only={runs[0].run_id})
    assert read_report(dirs[0] / "eval.json").status == "resolved"  # the timeout was evaluated again
    assert (dirs[1] / "eval.json").read_bytes() == kept  # outside `only`: left exactly as it was
    assert doc["runs"][runs[1].run_id] == {"status": "timeout", "resolved": False}
    assert doc["runs"][runs[2].run_id] == {"status": "not_run", "resolved": False}


# -- evaluation.on_error, by hand ---------------------------------------------------------------------
def test_fail_stops_before_the_statistics_naming_runs_instances_and_the_redo_command():
    with pytest.raises(RunOutputError) as info:
        stats("fail")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("stats: 1 of 16 evaluations errored")
    assert f"{ERRORED} (error)" in message and "instance(s) A:" in message
    assert "`forgetting evaluate --errored --config study.yaml`" in message
    assert "evaluation.on_error: exclude or unresolved" in message
    stats("fail", eval_errors=())  # no error: nothing stops


def test_exclude_drops_the_task_from_both_sides_of_that_evaluation_only():
    out = stats("exclude")
    e = effects(out)
    # delayed compared on B, C, D: it solves D (1); the baseline there 0.5 + 0 + 1 = 1.5
    solved = e[DELAYED, "tasks_solved"]
    assert (solved["n_tasks"], solved["value"], solved["reference"]) == (3, 1.0, 1.5)
    assert solved["estimate"] == pytest.approx(-0.5)
    # turns: delayed 60 100 40 → 60; baseline pooled over B, C, D: 30 40 50 60 70 80 → 55
    assert e[DELAYED, "turns"]["estimate"] == pytest.approx(60 / 55)
    # the immediate configuration keeps all four tasks (1 − 2.5)
    assert e[IMMEDIATE, "tasks_solved"]["n_tasks"] == 4
    assert e[IMMEDIATE, "tasks_solved"]["estimate"] == pytest.approx(-1.5)
    s = summary(out)
    assert (s[DELAYED]["n_eval_errors"], s[DELAYED]["n_excluded"], s[DELAYED]["eval_error_tasks"]) == (1, 1, ["A"])
    assert (s[DELAYED]["n_tasks"], s[DELAYED]["tasks_solved"]) == (3, 1.0)
    assert (s["baseline"]["n_tasks"], s["baseline"]["n_eval_errors"]) == (4, 0)


def test_exclude_is_the_same_as_both_sides_of_the_task_missing():
    """Every number of the excluded evaluation, CIs and p-values included, equals the one where
    the configuration's run and the baseline's runs of that task are missing."""
    excluded = effects(stats("exclude"))
    missing = {ERRORED, run_id("mini", "baseline", "A", 1), run_id("mini", "baseline", "A", 2)}
    dropped = compute_statistics(
        runs_table(missing=missing), tool_calls_table(), None,
        StatsSettings.from_section({"resamples": 300, "seed": 3}), task_order=TASKS,
    )
    numbers = ("value", "reference", "estimate", "ci_low", "ci_high", "p_value", "n_tasks", "n_undefined")
    for (conf, metric), row in effects(dropped).items():
        if conf == DELAYED:
            got = excluded[conf, metric]
            assert [got[k] for k in numbers] == pytest.approx([row[k] for k in numbers], nan_ok=True), metric
            assert got["significant"] == row["significant"]


def test_an_errored_baseline_run_excludes_its_task_from_every_evaluation_of_its_agent():
    out = stats("exclude", eval_errors=(run_id("mini", "baseline", "C", 2),))
    e = effects(out)
    # on A, B, D: delayed 1 + 0 + 1 = 2, immediate 0 + 0 + 1 = 1; baseline 1 + 0.5 + 1 = 2.5
    assert e[DELAYED, "tasks_solved"]["n_tasks"] == e[IMMEDIATE, "tasks_solved"]["n_tasks"] == 3
    assert e[DELAYED, "tasks_solved"]["estimate"] == pytest.approx(-0.5)
    assert e[IMMEDIATE, "tasks_solved"]["estimate"] == pytest.approx(-1.5)
    base = summary(out)["baseline"]
    assert (base["n_tasks"], base["tasks_solved"], base["n_eval_errors"], base["n_excluded"]) == (3, 2.5, 1, 2)
    pair = next(r for r in out["comparisons"].to_pylist() if r["metric"] == "tasks_solved")
    assert (pair["n_tasks"], pair["estimate"]) == (3, pytest.approx(-1.0))


def test_unresolved_counts_the_errored_run_as_not_solved():
    out = stats("unresolved")
    solved = effects(out)[DELAYED, "tasks_solved"]
    # on all four tasks; A (resolved before the error) now unsolved: 0 + 0 + 0 + 1 = 1, against 2.5
    assert (solved["n_tasks"], solved["value"], solved["reference"]) == (4, 1.0, 2.5)
    s = summary(out)[DELAYED]
    assert (s["n_eval_errors"], s["n_excluded"], s["n_tasks"]) == (1, 0, 4)


@pytest.mark.parametrize(
    "on_error, words",
    [
        ("exclude", ["Excluded (evaluation.on_error: exclude)", "(3 tasks; the baseline solves 1.5 of them)"]),
        ("unresolved", ["Counted as not solved (evaluation.on_error: unresolved)"]),
    ],
)
def test_table1_counts_the_errors_per_evaluation_and_says_what_was_done(on_error, words):
    out = stats(on_error)
    st = StatsTables.from_tables(out["effects"], out["comparisons"], out["summary"],
                                 StatsSettings.from_section({"resamples": 300, "seed": 3}, on_error=on_error))
    t = table1(st)
    assert [h.header for h in t.columns][-1] == "Eval errors"
    assert {r["timing"] + "/" + r["scope"]: r["errors"] for r in t.rows} == {
        "baseline/": "0", "delayed/tool output": "1", "immediate/tool output": "0"}
    notes = " ".join(t.notes)
    assert f"evaluation.on_error: {on_error}" in notes
    assert f"Evaluation errors (timeout or harness error: no verdict on the patch): 1 run(s) — mini/{DELAYED}: 1 (A)" \
        in notes
    for w in words:
        assert w in notes


# -- end to end: the demo tasks in the real on-disk format ---------------------------------------------
def digest(path: Path) -> dict[str, str]:
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def errored_demo(tmp_path_factory) -> tuple[Path, str, str]:
    """A synthetic study of the demo tasks (16 runs), analysed and collected, in which one mini
    baseline run — whose patch is the task's real fix — has an evaluation that errored, in its
    eval.json and in its batch's manifest, as a crashed container leaves them."""
    out = tmp_path_factory.mktemp("eval-errors") / "study"
    synthesize(ROOT / "config/demo.yaml", out, runs=16, workers=2, progress=lambda _: None)
    study = load_study(out / "study.yaml")
    batch = next(b for b in plan_batches(study) if b.key.startswith("mini/baseline/"))
    run = batch.runs[0]
    fix = load_instances(study, [run.task])[run.task]["patch"]
    run_dir = Layout(study.results_dir).run_dir(run.run_id)
    (run_dir / "patch.diff").write_text(fix)
    write_report(run_dir / "eval.json", EvalReport(
        instance_id=run.task, backend="local", status="error", resolved=False, patch_sha256=patch_digest(fix),
        error="apptainer exec exited 255: FATAL: container creation failed", run_id=run.run_id))
    manifest = Layout(study.results_dir).batch_dir(batch.key) / "eval.json"
    document = json.loads(manifest.read_text())
    document["runs"][run.run_id] = {"status": "error", "resolved": False}
    write_json(manifest, document)
    analyze_batches(study)
    collect(study)
    return out, run.run_id, batch.key


def overlay(config: Path, on_error: str) -> Path:
    path = config.parent / f"on-error-{on_error}.yaml"
    path.write_text(yaml.safe_dump({"evaluation": {"on_error": on_error}}))
    return path


@pytest.mark.slow
def test_each_on_error_value_on_the_demo_tasks(errored_demo, tmp_path, run_cli):
    template, rid, _ = errored_demo
    config = place(template, tmp_path / "study")
    task = rid.split("/")[2]
    proc = run_cli("report", config)
    assert proc.returncode == 2 and not (config.parent / "tables").exists()
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: stats: 1 of 16 evaluations errored") and f"{rid} (error)" in line
    assert f"instance(s) {task}:" in line and f"`forgetting evaluate --errored --config {config}`" in line
    for on_error, effect in (("exclude", "Excluded (evaluation.on_error: exclude)"),
                             ("unresolved", "Counted as not solved (evaluation.on_error: unresolved)")):
        proc = run_cli("report", config, overlay(config, on_error), "--only", "stats", "--only", "tables")
        assert proc.returncode == 0, proc.stderr
        md = (config.parent / "tables" / "table1.md").read_text()
        assert f"1 run(s) — mini/baseline: 1 ({task}). {effect}" in md
        baseline_row = next(line for line in md.splitlines() if line.startswith("| mini-swe-agent | baseline |"))
        assert baseline_row.endswith("| 1 |")  # the Eval errors column


def _snakemake_dry_run(config: Path) -> list:
    proc = subprocess.run([bin_path("snakemake"), "-n", "--cores", "1", "--configfile", str(config)],
                          cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    return parse_jobs(proc.stdout)


@pytest.mark.slow
def test_the_named_command_redoes_just_that_evaluation_and_the_workflow_picks_it_up(errored_demo, tmp_path, run_cli):
    template, rid, key = errored_demo
    config = place(template, tmp_path / "study")
    study = load_study(config)
    layout = Layout(study.results_dir)
    line = run_cli("report", config).stderr.strip()
    command = shlex.split(re.search(r"`(forgetting evaluate[^`]*)`", line).group(1))
    runs_before, batches_before = digest(layout.results / "runs"), digest(layout.results / "batches")

    proc = subprocess.run([sys.executable, "-m", "forgetting", *command[1:]], cwd=ROOT, env=cli_env(),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert f"{rid}: resolved" in proc.stdout and "1 evaluation(s) redone in 1 batch(es)" in proc.stdout
    report = read_report(layout.run_dir(rid) / "eval.json")
    assert (report.status, report.backend) == ("resolved", "local")
    # nothing else of any run changed: only that run's eval.json and eval/ directory
    runs_after = digest(layout.results / "runs")
    changed = {p for p in set(runs_before) | set(runs_after) if runs_before.get(p) != runs_after.get(p)}
    assert changed and all(p == f"{rid}/eval.json" or p.startswith(f"{rid}/eval/") for p in changed)
    # the batch's evaluation manifest is rewritten with the new status; no other batch file changed
    batches_after = digest(layout.results / "batches")
    assert {p for p in batches_after if batches_after[p] != batches_before.get(p)} == {f"{key}/eval.json"}
    assert json.loads((layout.batch_dir(key) / "eval.json").read_text())["runs"][rid]["status"] == "resolved"

    # the workflow analyses that batch again (and what follows), nothing upstream of it
    jobs = _snakemake_dry_run(config)
    assert {(j.rule, j.batch_key) for j in jobs if j.rule == "analyze_batch"} == {("analyze_batch", key)}
    assert not [j for j in jobs if j.rule in ("run_batch", "evaluate_batch", "plan")]
    assert {"collect", "stats", "tables"} <= {j.rule for j in jobs}

    analyze_batches(study, {key})  # what that job does
    collect(study)
    proc = run_cli("report", config, "--only", "stats", "--only", "tables")
    assert proc.returncode == 0, proc.stderr
    md = (layout.tables / "table1.md").read_text()
    assert "Evaluation errors (timeout" not in md and "evaluation.on_error: fail" in md
