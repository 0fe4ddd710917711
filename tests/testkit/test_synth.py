"""The synthetic study: real on-disk format, the real deletion engine's prompts, the analysis
unchanged, seeded and resumable, never mixed with real results."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from forgetting.analyze.batch import analyze_batch
from forgetting.cost import cost_run
from forgetting.cost.pricing import load_profiles
from forgetting.deletion import Reducer
from forgetting.foundation.errors import UserError
from forgetting.foundation.layout import Layout
from forgetting.prompt import chat_format
from forgetting.prompt.messages import prompt_messages
from forgetting.records import read_run_record
from forgetting.records.calllog import read_call_log
from forgetting.report.collect import collect
from forgetting.study.config import load_study
from forgetting.study.plan import plan_batches, plan_runs
from forgetting_testkit.checkout import ROOT, cli_env
from forgetting_testkit.synth import synthesize
from forgetting_testkit.synth.study import synthetic_config

PAPER = ROOT / "config" / "config.yaml"
FILES = ("calls.jsonl", "trajectory.json", "patch.diff", "eval.json", "run.json")


def synth_cli(*args: object) -> subprocess.CompletedProcess[str]:
    """``forgetting-synth ARGS`` (as ``python -m forgetting_testkit.synth``) from the repository root."""
    return subprocess.run([sys.executable, "-m", "forgetting_testkit.synth", *map(str, args)], cwd=ROOT,
                          env=cli_env(), capture_output=True, text=True, timeout=600)


def tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    """60 runs of the paper's study: 2 tasks, 2 agents, the baseline (5 repeats) and 10 configurations."""
    out = tmp_path_factory.mktemp("synth") / "study"
    synthesize(PAPER, out, runs=60, workers=2, progress=lambda _: None)
    return out


def test_every_planned_run_is_on_disk_marked_synthetic(small):
    study = load_study(small / "study.yaml")
    assert study.raw["study"]["synthetic"] is True and Path(study.results_dir) == small
    runs = plan_runs(study)
    assert len(runs) == 60 and {d.name for d in study.configurations} >= {"baseline"}
    layout = Layout(study.results_dir)
    for run in runs:
        run_dir = layout.run_dir(run.run_id)
        assert all((run_dir / name).is_file() for name in FILES), run.run_id
        meta = json.loads((run_dir / "run.json").read_text())
        assert meta["model_backend"] == "synthetic" and "synthetic" not in meta  # the one marker
        assert read_run_record(run_dir / "run.json").to_json() == (run_dir / "run.json").read_text()
        assert (meta["run_id"], meta["seed"], meta["agent"]) == (run.run_id, run.seed, run.agent)
        assert meta["status"] in ("submitted", "capped", "context_exceeded")
        report = json.loads((run_dir / "eval.json").read_text())
        assert report["backend"] == "synthetic" and report["resolved"] == (report["status"] == "resolved")
    assert pq.read_table(layout.plan_table).num_rows == 60
    for batch in plan_batches(study):
        for name in ("runs.json", "eval.json"):
            manifest = json.loads((layout.batch_dir(batch.key) / name).read_text())
            assert set(manifest["runs"]) == {r.run_id for r in batch.runs}


def test_call_log_holds_the_deletion_engines_prompts(small):
    """Replaying a mini run's own (unreduced) trajectory through the real Reducer gives exactly the
    prompts, token ids and deletion records its call log holds."""
    study = load_study(small / "study.yaml")
    layout = Layout(study.results_dir)
    settings = study.deletion
    checked = rewritten = 0
    for run in plan_runs(study):
        if run.agent != "mini" or run.deletion.is_baseline or checked == 4:
            continue
        run_dir = layout.run_dir(run.run_id)
        log = read_call_log(run_dir / "calls.jsonl")
        history = prompt_messages(json.loads((run_dir / "trajectory.json").read_text())["messages"])
        assistants = [i for i, m in enumerate(history) if m["role"] == "assistant"]
        reducer = Reducer(run.deletion, run.seed, actions=None, settings=settings)  # mini acts by tool calls
        tools = [chat_format_tool()]
        assert len(log.calls) == len(assistants)
        for call, end in zip(log.calls, assistants, strict=True):
            reduction = reducer.reduce(history[:end])
            ids = chat_format.prompt_token_ids(reduction.messages, tools)
            assert log.prompt_ids(call) == ids
            assert call.usage.prompt_tokens == len(ids)
            assert call.deleted == reduction.deleted
            rewritten += bool(call.deleted)
        checked += 1
    assert checked == 4 and rewritten > 0


def chat_format_tool() -> dict:
    from forgetting.cost.trajectory import MINI_BASH_TOOL

    return MINI_BASH_TOOL


def test_cost_reconstruction_sees_the_rewrites(small):
    study = load_study(small / "study.yaml")
    layout = Layout(study.results_dir)
    profiles = load_profiles(ROOT / "resources" / "pricing", ["paper"])
    rebilled = {}
    for run in plan_runs(study):
        if run.repeat == 1 and run.configuration in ("baseline", "delayed-turn-tool_output-75"):
            rebilled[run.run_id] = cost_run(layout.run_dir(run.run_id), profiles).summary["rebilled_tokens"]
    assert all(v == 0 for k, v in rebilled.items() if "/baseline/" in k)
    assert any(v > 0 for k, v in rebilled.items() if "/baseline/" not in k)


def test_synthetic_runs_go_through_analysis_collection_and_statistics(small, tmp_path):
    from forgetting.report.stats.run import write_stats
    from forgetting.report.tables import write_tables

    out = tmp_path / "copy"
    shutil.copytree(small, out)
    cfg = yaml.safe_load((out / "study.yaml").read_text())
    cfg["study"]["results_dir"] = str(out)
    cfg["statistics"] = {**cfg.get("statistics", {}), "resamples": 500}
    (out / "study.yaml").write_text(yaml.safe_dump(cfg))
    study = load_study(out / "study.yaml")
    layout = Layout(study.results_dir)
    for batch in plan_batches(study):
        d = layout.batch_dir(batch.key)
        outputs = {n: d / f"{n}.parquet" for n in ("summary", "calls", "tool_calls", "run_costs", "timings")}
        assert analyze_batch(study, batch, outputs=outputs) == len(batch.runs)
    report = collect(study)
    assert report.collected == 60 and not report.missing
    runs = pq.read_table(layout.dataset("runs")).to_pylist()
    assert {r["model_backend"] for r in runs} == {"synthetic"}
    assert any(r["capped"] for r in runs) or any(r["turns"] >= 100 for r in runs)
    write_stats(study)
    write_tables(study)
    assert "SYNTHETIC DATA" in (layout.tables / "table1.md").read_text()


def test_same_seed_same_bytes_and_a_rerun_redoes_only_what_is_missing(small, tmp_path):
    again = tmp_path / "again"
    synthesize(PAPER, again, runs=60, workers=2, progress=lambda _: None)
    for part in ("runs", "batches", "plan"):
        assert tree_digest(small / part) == tree_digest(again / part), part
    victim = next((again / "runs" / "mini" / "baseline").iterdir()) / "3"
    shutil.rmtree(victim)
    report = synthesize(PAPER, again, runs=60, workers=1, progress=lambda _: None)
    assert (report.generated, report.kept) == (1, 59)
    assert tree_digest(small / "runs") == tree_digest(again / "runs")
    with pytest.raises(UserError, match="generator_seed"):
        synthesize(PAPER, again, runs=60, seed=5, progress=lambda _: None)


def test_another_seed_gives_other_runs(small, tmp_path):
    other = tmp_path / "other"
    synthesize(PAPER, other, runs=20, seed=99, workers=2, progress=lambda _: None)
    a, b = tree_digest(small / "runs"), tree_digest(other / "runs")
    common = [k for k in a.keys() & b.keys() if k.endswith("calls.jsonl")]
    assert len(common) >= 10 and all(a[k] != b[k] for k in common)


def real_config(tmp_path: Path, results: Path) -> Path:
    cfg = yaml.safe_load(PAPER.read_text())
    cfg["study"]["results_dir"] = str(results)
    for key in ("ids_file",):
        cfg["tasks"][key] = str(ROOT / cfg["tasks"][key])
    cfg["dataset"]["known_ids"] = str(ROOT / cfg["dataset"]["known_ids"])
    path = tmp_path / "real.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_refuses_to_write_among_real_results(tmp_path):
    results = tmp_path / "results"
    config = real_config(tmp_path, results)
    proc = synth_cli(config, "--out", results, "--runs", "60")
    assert proc.returncode == 2 and proc.stderr.count("error:") == 1, proc.stderr
    assert "results directory" in proc.stderr and not results.exists()
    proc = synth_cli(config, "--out", results / "sub", "--runs", "60")
    assert proc.returncode == 2 and "results directory" in proc.stderr
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    proc = synth_cli(PAPER, "--out", busy, "--runs", "60")
    assert proc.returncode == 2 and "not empty" in proc.stderr and (busy / "notes.txt").read_text() == "mine"
    real = tmp_path / "real-study"
    real.mkdir()
    (real / "study.yaml").write_text(yaml.safe_dump({"study": {"name": "x", "seed": 1, "synthetic": False}}))
    proc = synth_cli(PAPER, "--out", real, "--runs", "60")
    assert proc.returncode == 2 and "study.synthetic" in proc.stderr and not (real / "runs").exists()


def test_a_synthetic_run_is_never_analysed_in_a_real_study(small, tmp_path):
    results = tmp_path / "results"
    study = load_study(real_config(tmp_path, results), {"tasks": {"ids": ["astropy__astropy-13398"]},
                                                        "configurations": {"names": "none"}, "agents": ["mini"]})
    (batch,) = plan_batches(study)
    run = batch.runs[0]
    shutil.copytree(small / "runs" / run.run_id, Layout(study.results_dir).run_dir(run.run_id))
    log = tmp_path / "analyze.log"
    outputs = {n: tmp_path / f"{n}.parquet" for n in ("summary", "calls", "tool_calls", "run_costs", "timings")}
    assert analyze_batch(study, batch, outputs=outputs, log=log) == 0
    assert "a synthetic run" in log.read_text() and run.run_id in log.read_text()


def test_runs_option_narrows_tasks_then_configurations(tmp_path):
    source = load_study(PAPER)
    raw = yaml.safe_load(PAPER.read_text())
    cfg = synthetic_config(source, raw, tmp_path, 400)
    assert len(cfg["tasks"]["ids"]) == 4 and cfg["configurations"] == raw["configurations"]
    cfg = synthetic_config(source, raw, tmp_path, 60)
    assert len(cfg["tasks"]["ids"]) == 2 and len(cfg["configurations"]["names"]) == 10
    assert synthetic_config(source, raw, tmp_path, None)["tasks"]["ids_file"].startswith("/")
    with pytest.raises(UserError, match="smallest study"):
        synthetic_config(source, raw, tmp_path, 5)


def test_deletion_effects_are_shaped_like_the_papers(tmp_path):
    """More tool output deleted → more re-fetches; rewrites re-bill input; realistic run lengths."""
    cfg = yaml.safe_load(PAPER.read_text())
    cfg["agents"] = ["mini", "trae"]
    cfg["tasks"] = {"ids": [t for t in (ROOT / "resources/tasks/swe-bench-verified-100.txt").read_text().split()
                            if not t.startswith("#")][:6]}
    cfg["configurations"] = {"names": ["delayed-turn-tool_output-50", "delayed-turn-tool_output-100"]}
    cfg["repeats"] = {"baseline": 2}
    config = tmp_path / "shape.yaml"
    cfg["dataset"]["known_ids"] = str(ROOT / cfg["dataset"]["known_ids"])
    config.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "out"
    synthesize(config, out, workers=2, progress=lambda _: None)
    study = load_study(out / "study.yaml")
    profiles = load_profiles(ROOT / "resources" / "pricing", ["paper"])
    from forgetting.behaviour import label_run

    by_conf: dict[str, dict[str, list]] = {}
    for run in plan_runs(study):
        run_dir = Layout(study.results_dir).run_dir(run.run_id)
        b = label_run(run_dir)
        c = cost_run(run_dir, profiles)
        agg = by_conf.setdefault(run.configuration, {"reads": [], "refetches": [], "rebilled": [], "calls": [],
                                                     "max_prompt": []})
        agg["reads"].append(b.summary["n_reads"])
        agg["refetches"].append(b.summary["n_refetches"])
        agg["rebilled"].append(c.summary["rebilled_tokens"])
        agg["calls"].append(c.calls.num_rows)
        agg["max_prompt"].append(max(c.calls.column("prompt_tokens").to_pylist()))

    def rate(name: str) -> float:
        return sum(by_conf[name]["refetches"]) / sum(by_conf[name]["reads"])

    assert rate("baseline") < rate("delayed-turn-tool_output-50") < rate("delayed-turn-tool_output-100")
    assert sum(by_conf["baseline"]["rebilled"]) == 0 and min(by_conf["delayed-turn-tool_output-100"]["rebilled"]) > 0
    calls = sorted(by_conf["baseline"]["calls"])
    assert 25 <= calls[len(calls) // 2] <= 90
    prompts = sorted(by_conf["baseline"]["max_prompt"])
    assert 30_000 <= prompts[len(prompts) // 2] <= 200_000
