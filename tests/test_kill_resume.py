"""SIGKILL in the middle of a stage: the next invocation completes, redoes only what was
interrupted, and the final tables are byte-identical to an uninterrupted run.

The kill comes from the stage itself (``forgetting.foundation.faults.checkpoint``, armed by
``FORGETTING_KILL_AT``), so it lands at the same point every time: right after the N-th
output of the stage, or as an evaluation starts. The studies are synthetic (forgetting-synth);
the evaluation test evaluates real patches of the demo tasks with the local backend.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from forgetting.evaluate import read_report
from forgetting.foundation.layout import Layout
from forgetting.instances.load import load_instances
from forgetting.report.collect import collect
from forgetting.report.stats.run import write_stats
from forgetting.report.tables import write_tables
from forgetting.study.config import load_study
from forgetting.study.plan import plan_batches
from forgetting_testkit.checkout import ROOT, bin_path, cli_env
from forgetting_testkit.studies import analyze_batches, paper_config, place, synthetic_study
from forgetting_testkit.synth import synthesize

KILLED = -signal.SIGKILL


def digest(path: Path) -> dict[str, str]:
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.rglob("*"))
            if p.is_file() and not p.name.endswith(".tmp")}


def killed(*args: str, at: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "forgetting", *args], cwd=cwd, capture_output=True, text=True,
                          env=cli_env({"FORGETTING_KILL_AT": at}), timeout=600)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "forgetting", *args], cwd=ROOT, capture_output=True, text=True,
                          env=cli_env(), timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture(scope="module")
def paper_small(tmp_path_factory) -> Path:
    """A synthetic study (mini; 3 tasks; the baseline twice and two configurations), analysed."""
    cfg = paper_config()
    tasks = [t for t in (ROOT / "resources/tasks/swe-bench-verified-100.txt").read_text().split() if "__" in t]
    cfg["agents"] = ["mini"]
    cfg["tasks"] = {"ids": tasks[:3]}
    cfg["configurations"] = {"names": ["delayed-turn-tool_output-50", "immediate-token-both-25"]}
    cfg["repeats"] = {"baseline": 2}
    cfg["statistics"] = {"resamples": 300}
    return synthetic_study(tmp_path_factory.mktemp("kill"), cfg)


@pytest.fixture(scope="module")
def reference(paper_small, tmp_path_factory) -> Path:
    """The uninterrupted run: collect, then statistics, tables and figures."""
    config = place(paper_small, tmp_path_factory.mktemp("ref") / "study")
    cli("collect", str(config))
    cli("report", str(config))
    return config.parent


@pytest.mark.slow
def test_collection_killed_after_its_first_datasets(paper_small, reference, tmp_path):
    config = place(paper_small, tmp_path / "study")
    layout = Layout(config.parent)
    batches = digest(layout.results / "batches")
    proc = killed("collect", str(config), at="collect.dataset@2")
    assert proc.returncode == KILLED
    # the datasets are replaced as a set once all are written: none is in place, each one staged
    assert not list(layout.datasets.glob("*.parquet"))
    assert len(list(layout.datasets.glob(".*.parquet.*.tmp"))) == 5
    cli("collect", str(config))
    assert digest(layout.results / "batches") == batches  # no batch analysis redone
    assert digest(layout.datasets) == digest(reference / "datasets")
    assert not list(layout.datasets.glob(".*.tmp"))  # the killed attempt's staged files are gone
    # killed again with the datasets in place: the last good ones stay as they were
    proc = killed("collect", str(config), at="collect.dataset@4")
    assert proc.returncode == KILLED
    assert digest(layout.datasets) == digest(reference / "datasets")
    cli("report", str(config))
    assert digest(layout.tables) == digest(reference / "tables")


@pytest.mark.slow
def test_report_killed_while_writing_its_tables(paper_small, reference, tmp_path):
    config = place(paper_small, tmp_path / "study")
    layout = Layout(config.parent)
    cli("collect", str(config))
    proc = killed("report", str(config), at="tables.table@3")
    assert proc.returncode == KILLED
    written = {p.stem for p in layout.tables.iterdir()}
    assert len(written) == 3 and not layout.figures.exists()
    stats = digest(layout.stats)
    # the next invocation of the interrupted steps only: the statistics stay as they were
    cli("report", str(config), "--only", "tables", "--only", "figures")
    assert digest(layout.stats) == stats == digest(reference / "stats")
    assert digest(layout.tables) == digest(reference / "tables")
    assert digest(layout.figures) == digest(reference / "figures")


@pytest.mark.slow
def test_workflow_killed_in_its_tables_job_resumes_with_that_job(paper_small, reference, tmp_path):
    """Through Snakemake: the killed job's outputs are removed, the next invocation runs it (and
    what depends on it) again and nothing upstream."""
    config = place(paper_small, tmp_path / "study")
    layout = Layout(config.parent)
    shutil.rmtree(layout.results / "batches")  # regenerate=true rebuilds the analyses from the runs
    base = [bin_path("snakemake"), "--cores", "1", "--configfile", str(config), "--config", "regenerate=true",
            "--directory", str(ROOT)]
    first = subprocess.run(base, cwd=ROOT, capture_output=True, text=True, timeout=900,
                           env=cli_env({"FORGETTING_KILL_AT": "tables.table@2"}))
    assert first.returncode != 0 and "tables" in first.stderr
    upstream = {**digest(layout.results / "batches"), **digest(layout.datasets), **digest(layout.stats)}
    second = subprocess.run(base, cwd=ROOT, capture_output=True, text=True, timeout=900, env=cli_env())
    assert second.returncode == 0, second.stderr
    ran = second.stderr
    assert "rule tables:" in ran and "rule analyze_batch:" not in ran and "rule collect:" not in ran
    assert {**digest(layout.results / "batches"), **digest(layout.datasets), **digest(layout.stats)} == upstream
    assert digest(layout.tables) == digest(reference / "tables")
    assert digest(layout.datasets) == digest(reference / "datasets")


# -- evaluation ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def demo_small(tmp_path_factory) -> Path:
    """A synthetic study of the demo tasks (16 runs) whose mini baseline batch has real patches:
    the gold fix twice, a patch that does not apply, an empty one."""
    out = tmp_path_factory.mktemp("demo") / "study"
    synthesize(ROOT / "config/demo.yaml", out, runs=16, workers=2, progress=lambda _: None)
    study = load_study(out / "study.yaml")
    batch = next(b for b in plan_batches(study) if b.key.startswith("mini/baseline/"))
    rows = load_instances(study, sorted({r.task for r in batch.runs}))
    stray = ("diff --git a/nowhere.py b/nowhere.py\n--- a/nowhere.py\n+++ b/nowhere.py\n"
             "@@ -1,1 +1,1 @@\n-old line\n+new line\n")
    patches = [rows[batch.runs[0].task]["patch"], stray, rows[batch.runs[2].task]["patch"], ""]
    for run, patch in zip(batch.runs, patches, strict=True):
        (Layout(study.results_dir).run_dir(run.run_id) / "patch.diff").write_text(patch)
    return out


DRIVER = """
import sys
from forgetting.study.config import load_study
from forgetting.evaluate import evaluate_batch
from forgetting.study.plan import plan_batches
study = load_study(sys.argv[1])
batch = next(b for b in plan_batches(study) if b.key.startswith("mini/baseline/"))
evaluate_batch(study, batch, manifest=sys.argv[2], log=sys.argv[3])
"""


def evaluate(config: Path, kill_at: str | None = None) -> subprocess.CompletedProcess[str]:
    d = config.parent
    env = cli_env({"FORGETTING_KILL_AT": kill_at} if kill_at else None)
    return subprocess.run([sys.executable, "-c", DRIVER, str(config), str(d / "manifest.json"), str(d / "eval.log")],
                          cwd=ROOT, capture_output=True, text=True, env=env, timeout=600)


def final_tables(config: Path) -> dict[str, str]:
    study = load_study(config)
    analyze_batches(study)
    collect(study)
    write_stats(study)
    write_tables(study)
    return digest(Layout(study.results_dir).tables)


@pytest.mark.slow
def test_evaluation_killed_during_a_run_redoes_that_run_and_the_rest_only(demo_small, tmp_path):
    ref = place(demo_small, tmp_path / "ref")
    proc = evaluate(ref)
    assert proc.returncode == 0, proc.stderr
    reference = json.loads((ref.parent / "manifest.json").read_text())
    assert sorted(e["status"] for e in reference["runs"].values()) == [
        "empty_patch", "patch_failed", "resolved", "resolved"]

    config = place(demo_small, tmp_path / "study")
    study = load_study(config)
    batch = next(b for b in plan_batches(study) if b.key.startswith("mini/baseline/"))
    dirs = [Layout(study.results_dir).run_dir(r.run_id) for r in batch.runs]
    proc = evaluate(config, kill_at="evaluate.started@3")  # killed as the third evaluation starts
    assert proc.returncode == KILLED and not (config.parent / "manifest.json").exists()
    done = [d for d in dirs if read_report(d / "eval.json").backend == "local"]
    assert len(done) == 2 and (dirs[2] / "eval").is_dir()  # the third was under way
    kept = {d: (d / "eval.json").read_bytes() for d in done}
    proc = evaluate(config)
    assert proc.returncode == 0, proc.stderr
    log = (config.parent / "eval.log").read_text()
    assert log.count("(evaluated before)") == 2 and "evaluating 2 of 4 runs" in log
    assert all((d / "eval.json").read_bytes() == data for d, data in kept.items())
    assert json.loads((config.parent / "manifest.json").read_text()) == reference
    for a, b in zip(dirs, [Layout(load_study(ref).results_dir).run_dir(r.run_id) for r in batch.runs], strict=True):
        ra, rb = read_report(a / "eval.json"), read_report(b / "eval.json")
        ra.durations = rb.durations = {}
        assert ra == rb
    assert final_tables(config) == final_tables(ref)
