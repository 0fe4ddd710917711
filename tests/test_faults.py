"""Bad run outputs and resources: each one a one-line error naming the file; a bad run is
isolated and listed, every other run analysed, nothing already written lost.

Run outputs come from a small synthetic study (forgetting-synth: the real on-disk format);
evaluation faults use the evaluation tests' fixture task with the real local backend.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from forgetting import cli
from forgetting.analyze.batch import analyze_batch
from forgetting.evaluate import evaluate_batch, read_report
from forgetting.foundation.errors import ConfigError, ResourceError, UserError
from forgetting.foundation.layout import Layout
from forgetting.instances.load import load_available
from forgetting.report.collect import collect
from forgetting.study.config import load_study
from forgetting.study.plan import plan_batches, plan_runs
from forgetting_testkit import evaltask
from forgetting_testkit.checkout import ROOT, cli_env
from forgetting_testkit.studies import BATCH_FILES, paper_config, synthetic_study
from forgetting_testkit.trajectories import write_run_json

TASKS = [t for t in (ROOT / "resources/tasks/swe-bench-verified-100.txt").read_text().split() if "__" in t][:2]
TARGET = f"mini/delayed-turn-tool_output-50/{TASKS[0]}/1"
TRAE_TWIN = f"trae/delayed-turn-tool_output-50/{TASKS[0]}/1"


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """12 runs (mini and trae; 2 tasks; the baseline twice and one deletion configuration), analysed."""
    cfg = paper_config()
    cfg["tasks"] = {"ids": TASKS}
    cfg["configurations"] = {"names": ["delayed-turn-tool_output-50"]}
    cfg["repeats"] = {"baseline": 2}
    cfg["statistics"] = {"resamples": 200, "missing_runs": "mark"}
    return synthetic_study(tmp_path_factory.mktemp("faults"), cfg)


def fresh(template: Path, dest: Path):
    shutil.copytree(template, dest)
    cfg = yaml.safe_load((dest / "study.yaml").read_text())
    cfg["study"]["results_dir"] = str(dest)
    (dest / "study.yaml").write_text(yaml.safe_dump(cfg))
    return load_study(dest / "study.yaml")


def digest(path: Path) -> dict[str, str]:
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.rglob("*"))
            if p.is_file()}


# -- mutations of one run's outputs ---------------------------------------------------------------
def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def truncate_mid_line(d: Path) -> None:
    data = (d / "calls.jsonl").read_bytes()
    (d / "calls.jsonl").write_bytes(data[: int(len(data) * 0.6)])


def cut_whole_lines(d: Path) -> None:
    lines = lines_of(d / "calls.jsonl")
    calls = [i for i, line in enumerate(lines) if '"type":"call"' in line]
    (d / "calls.jsonl").write_text("".join(lines[: calls[-3]]))


def corrupt_middle_line(d: Path) -> None:
    lines = lines_of(d / "calls.jsonl")
    lines[len(lines) // 2] = "\x00\x17 garbage that is not JSON\n"
    (d / "calls.jsonl").write_text("".join(lines))


def rewrite_header(**changes) -> Callable[[Path], None]:
    def mutate(d: Path) -> None:
        lines = lines_of(d / "calls.jsonl")
        header = json.loads(lines[0])
        header.update(changes)
        lines[0] = json.dumps(header) + "\n"
        (d / "calls.jsonl").write_text("".join(lines))

    return mutate


def drop_a_segment(d: Path) -> None:
    lines = lines_of(d / "calls.jsonl")
    i = next(i for i, line in enumerate(lines) if i > 3 and '"type":"segment"' in line)
    (d / "calls.jsonl").write_text("".join(lines[:i] + lines[i + 1 :]))


def negative_deletion(d: Path) -> None:
    # (a placeholder longer than its part, tokens_after > tokens_before, is no fault: every
    # token of the part is still removed; a negative count is)
    lines = lines_of(d / "calls.jsonl")
    for i, line in enumerate(lines):
        rec = json.loads(line)
        if rec.get("type") == "call" and rec["deleted"]:
            rec["deleted"][0]["tokens_removed"] = -5
            lines[i] = json.dumps(rec) + "\n"
            break
    else:
        raise AssertionError("the target run rewrote nothing")
    (d / "calls.jsonl").write_text("".join(lines))


def write_file(name: str, data: bytes | str) -> Callable[[Path], None]:
    def mutate(d: Path) -> None:
        (d / name).write_bytes(data if isinstance(data, bytes) else data.encode())

    return mutate


def remove(name: str) -> Callable[[Path], None]:
    return lambda d: (d / name).unlink()


def edit_json(name: str, **changes) -> Callable[[Path], None]:
    def mutate(d: Path) -> None:
        doc = json.loads((d / name).read_text())
        doc.update(changes)
        (d / name).write_text(json.dumps(doc))

    return mutate


def other_agents_trajectory(d: Path) -> None:
    twin = d.parents[3] / TRAE_TWIN
    shutil.copy(twin / "trajectory.json", d / "trajectory.json")


#: name → (mutation, what the one line must say besides the file, the command that reads the file)
RUN_OUTPUT_FAULTS: dict[str, tuple[Callable[[Path], None], str, str, str | None]] = {
    "call log truncated mid-line": (truncate_mid_line, "calls.jsonl", "truncated", None),
    "call log cut after whole lines": (cut_whole_lines, "calls.jsonl", "the call log is truncated", None),
    "call log with a corrupt line": (corrupt_middle_line, "calls.jsonl", "is not a JSON record", "cost"),
    "call log of an unknown format": (rewrite_header(format="someone-elses-log/3"), "calls.jsonl",
                                      "unknown call-log format", "cost"),
    "call log of another run": (rewrite_header(run_id="mini/baseline/x/1"), "calls.jsonl",
                                "the call log of run mini/baseline/x/1", None),
    "call log missing": (remove("calls.jsonl"), "calls.jsonl", "call log not found", None),
    "call log lacking a segment": (drop_a_segment, "calls.jsonl", "refers to unknown segment", "cost"),
    "call log with a negative deletion": (negative_deletion, "calls.jsonl", "a token count is negative", "cost"),
    "trajectory in an unknown format": (write_file("trajectory.json", '{"steps": [], "version": 7}'),
                                        "trajectory.json", "unknown trajectory format", "label"),
    "trajectory not JSON": (write_file("trajectory.json", b"\x89PNG\r\n\x1a\n\x00\x00"), "trajectory.json",
                            "not a JSON file", "label"),
    "trajectory of the other agent": (other_agents_trajectory, "trajectory.json", "agent was given as 'mini'",
                                      "label"),
    "trajectory missing": (remove("trajectory.json"), "", "no trajectory.json", "label"),
    "run record not JSON": (write_file("run.json", '{"run_id": "mini/'), "run.json", "not readable JSON", "label"),
    "run record with an unknown status": (edit_json("run.json", status="finished"), "run.json",
                                          "'finished' is not a run outcome", None),
    "run record of another seed": (edit_json("run.json", seed=12345), "run.json",
                                   "seed 12345 differs from the plan's", None),
    "evaluation report missing": (remove("eval.json"), "eval.json", "evaluation report not found", None),
    "evaluation report with an unknown status": (edit_json("eval.json", status="passed"), "eval.json",
                                                 "'passed' is not an evaluation outcome", None),
    "evaluation report contradicting itself": (edit_json("eval.json", status="resolved", resolved=False),
                                               "eval.json", "contradicts status 'resolved'", None),
}


@pytest.mark.parametrize("fault", sorted(RUN_OUTPUT_FAULTS))
def test_a_bad_run_output_is_one_line_naming_the_file_and_the_run_is_isolated(fault, template, tmp_path, capsys):
    mutate, file, words, command = RUN_OUTPUT_FAULTS[fault]
    study = fresh(template, tmp_path / "study")
    layout = Layout(study.results_dir)
    run_dir = layout.run_dir(TARGET)
    mutate(run_dir)
    bad_files = digest(run_dir)
    batch = next(b for b in plan_batches(study) if TARGET in {r.run_id for r in b.runs})
    others = digest(layout.results / "runs" / "trae")
    log = tmp_path / "analyze.log"
    d = layout.batch_dir(batch.key)
    assert analyze_batch(study, batch, outputs={n: d / f"{n}.parquet" for n in BATCH_FILES}, log=log) == 1
    (line,) = [x for x in log.read_text().splitlines() if TARGET in x]
    assert f"{run_dir / file}" in line and words in line, line
    report = collect(study, log=tmp_path / "collect.log")
    ((rid, reason),) = report.missing
    assert rid == TARGET and words in reason
    assert f"missing run {TARGET}: " in (tmp_path / "collect.log").read_text()
    rows = {r["run_id"]: r for r in pq.read_table(layout.dataset("runs")).to_pylist()}
    assert len(rows) == len(plan_runs(study)) and rows[TARGET]["status"] == "missing"
    assert all(r["status"] in ("submitted", "capped") for k, r in rows.items() if k != TARGET)
    # nothing else lost: the bad run's files and every other run are as they were
    assert digest(run_dir) == bad_files and digest(layout.results / "runs" / "trae") == others
    if command is not None:
        capsys.readouterr()
        assert cli.main([command, str(run_dir)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"error: {run_dir / file}"), err


# -- evaluation: a binary patch, an instance the dataset lacks --------------------------------------
@pytest.fixture
def eval_study(tmp_path, monkeypatch):
    """A demo-kind study of the evaluation fixture task and a second task, local backend."""
    path = evaltask.demo_study(tmp_path, monkeypatch, other_tasks=("demo__calc-2",), repeats=2)
    study = load_study(path)
    (batch,) = plan_batches(study)
    for run in batch.runs:
        d = Layout(study.results_dir).run_dir(run.run_id)
        d.mkdir(parents=True)
        (d / "patch.diff").write_text(evaltask.patch("gold"))
        write_run_json(d, seed=run.seed)
    return path, study, batch


@pytest.mark.parametrize("content,words", [
    (b"diff --git a/calc.py b/calc.py\n\x00\x01\x02binary\n", "a NUL byte at offset 31"),
    ("diff --git a/calc.py b/calc.py\n+caf\xe9\n".encode("latin-1"), "not UTF-8 at offset 35"),
])
def test_a_binary_patch_fails_its_run_only(eval_study, tmp_path, content, words, capsys):
    path, study, batch = eval_study
    bad = batch.runs[1]
    bad_dir = Layout(study.results_dir).run_dir(bad.run_id)
    (bad_dir / "patch.diff").write_bytes(content)
    log = tmp_path / "evaluate.log"
    doc = evaluate_batch(study, batch, manifest=tmp_path / "eval.json", log=log)
    assert doc["runs"][bad.run_id] == {"status": "error", "resolved": False}
    assert all(v["status"] == "resolved" for k, v in doc["runs"].items() if k != bad.run_id)
    report = read_report(bad_dir / "eval.json")
    assert report.status == "error" and f"{bad_dir / 'patch.diff'}: binary content ({words}" in report.error
    (line,) = [x for x in log.read_text().splitlines() if x.startswith(bad.run_id)]
    assert "patch.diff" in line and "binary content" in line
    assert (bad_dir / "patch.diff").read_bytes() == content
    assert cli.main(["evaluate", str(bad_dir), "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "patch.diff: binary content" in err


def test_an_instance_missing_from_the_dataset_fails_its_runs_only(eval_study, tmp_path):
    _, study, batch = eval_study
    tasks = Path(study.raw["dataset"]["instances"])
    shutil.rmtree(tasks / "demo__calc-2")  # the dataset changed after the runs were made
    log = tmp_path / "evaluate.log"
    doc = evaluate_batch(study, batch, manifest=tmp_path / "eval.json", log=log)
    lost = [r.run_id for r in batch.runs if r.task == "demo__calc-2"]
    assert len(lost) == 2
    for run in batch.runs:
        want = "error" if run.run_id in lost else "resolved"
        assert doc["runs"][run.run_id]["status"] == want
    for rid in lost:
        report = read_report(Layout(study.results_dir).run_dir(rid) / "eval.json")
        assert "demo__calc-2" in report.error and str(tasks / "demo__calc-2") in report.error
        assert any(line.startswith(f"{rid}: error (") for line in log.read_text().splitlines())


def test_load_available_names_the_dataset_file_and_the_missing_id(tmp_path):
    known = tmp_path / "known.txt"
    known.write_text("a__b-1\nc__d-2\n")
    jsonl = tmp_path / "verified.jsonl"
    jsonl.write_text(json.dumps({"instance_id": "a__b-1", "repo": "a/b"}) + "\n")
    cfg = {"study": {"name": "s", "seed": 1, "results_dir": str(tmp_path / "r")}, "agents": ["mini"],
           "tasks": {"ids": ["a__b-1", "c__d-2"]},
           "dataset": {"kind": "swebench", "known_ids": str(known), "instances": str(jsonl)},
           "configurations": {"names": "none"}, "model": {"backend": "vllm", "name": "m"},
           "pricing": {"dir": str(ROOT / "resources/pricing")}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(cfg))
    rows, missing = load_available(load_study(tmp_path / "s.yaml"), ["a__b-1", "c__d-2"])
    assert list(rows) == ["a__b-1"]
    assert missing == {"c__d-2": f"{jsonl}: no instance 'c__d-2'; is dataset.instances the SWE-bench Verified file?"}


def test_a_corrupt_dataset_file_stops_the_evaluation_before_any_work(eval_study, tmp_path):
    path, study, batch = eval_study
    first = Layout(study.results_dir).run_dir(batch.runs[0].run_id)
    (first / "eval.json").write_text('{"kept": true}\n')
    (Path(study.raw["dataset"]["instances"]) / "demo__calc-2" / "instance.json").write_text("{oops")
    # a demo task is one dataset row: its runs fail, the other task's are evaluated
    doc = evaluate_batch(study, batch, manifest=tmp_path / "m.json")
    assert sorted(v["status"] for v in doc["runs"].values()) == ["error", "error", "resolved", "resolved"]
    # a SWE-bench file is one file: a corrupt line stops the batch in one line, nothing written
    jsonl = tmp_path / "verified.jsonl"
    jsonl.write_text('{"instance_id": "a__b-1"}\n{"instance_id": \n')
    cfg = yaml.safe_load(path.read_text())
    cfg["dataset"] = {"kind": "swebench", "instances": str(jsonl), "known_ids": str(tmp_path / "known.txt")}
    cfg["tasks"] = {"ids": ["a__b-1"]}
    cfg["evaluation"] = {"backend": "docker"}
    (tmp_path / "known.txt").write_text("a__b-1\n")
    (tmp_path / "sw.yaml").write_text(yaml.safe_dump(cfg))
    sw = load_study(tmp_path / "sw.yaml")
    (sw_batch,) = plan_batches(sw)
    d = Layout(sw.results_dir).run_dir(sw_batch.runs[0].run_id)
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    (d / "patch.diff").write_text("diff --git a/x b/x\n")
    write_run_json(d)
    (d / "eval.json").write_text('{"kept": true}\n')
    with pytest.raises(ResourceError, match=rf"^{jsonl}: line 2 is not valid JSON"):
        evaluate_batch(sw, sw_batch, manifest=tmp_path / "sw-manifest.json")
    assert (d / "eval.json").read_text() == '{"kept": true}\n' and not (tmp_path / "sw-manifest.json").exists()


# -- resources and collected files -----------------------------------------------------------------
def pricing_config(tmp_path: Path, sheet: str | None, profiles: list[str] | None = None) -> Path:
    prices = tmp_path / "pricing"
    prices.mkdir(exist_ok=True)
    shutil.copy(ROOT / "resources/pricing/paper.yaml", prices / "paper.yaml")
    if sheet is not None:
        (prices / "cheap.yaml").write_text(sheet)
    cfg = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    cfg["pricing"] = {"dir": str(prices), "primary": "paper", "profiles": profiles or ["paper", "cheap"]}
    cfg["tasks"] = {"ids": TASKS}
    cfg["dataset"]["known_ids"] = str(ROOT / cfg["dataset"]["known_ids"])
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


NEGATIVE = "per_million_tokens:\n  input: -0.45\n  cached_input: 0.09\n  output: 2.25\n"


@pytest.mark.parametrize("sheet,profiles,words", [
    (NEGATIVE, None, "cheap.yaml: per_million_tokens.input must be ≥ 0 (got -0.45)"),
    (None, None, "cheap.yaml: no pricing profile 'cheap'; available in"),
    ("per_million_tokens: {input: 0.4, cached_input: [\n", None, "cheap.yaml: line 2: not valid YAML"),
])
def test_a_bad_price_sheet_stops_the_study_before_any_job(tmp_path, run_cli, sheet, profiles, words):
    config = pricing_config(tmp_path, sheet, profiles)
    proc = run_cli("plan", config)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"error: {config}: pricing: ") and words in proc.stderr
    with pytest.raises(ConfigError, match="pricing"):
        load_study(config)


@pytest.mark.slow
def test_snakemake_stops_on_a_negative_price_before_any_job(tmp_path):
    config = pricing_config(tmp_path, NEGATIVE)
    proc = subprocess.run([str(Path(sys.executable).parent / "snakemake"), "-n", "-c1", "--configfile", str(config)],
                          cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert any("per_million_tokens.input must be ≥ 0" in line and "cheap.yaml" in line
               for line in proc.stderr.splitlines()), proc.stderr


def test_a_price_sheet_broken_after_planning_fails_the_analysis_before_any_run(template, tmp_path):
    """The study is parsed once per process, at its boundary: an analysis job builds it from the
    workflow's config first (forgetting.workflow.study_of), so a price sheet broken after the
    plan was made stops that job in one line before any run is read, its batch untouched."""
    from types import SimpleNamespace

    from forgetting.workflow import study_of

    study = fresh(template, tmp_path / "study")
    prices = tmp_path / "pricing"
    shutil.copytree(ROOT / "resources/pricing", prices)
    cfg = yaml.safe_load((tmp_path / "study" / "study.yaml").read_text())
    cfg["pricing"]["dir"] = str(prices)
    (tmp_path / "study" / "study.yaml").write_text(yaml.safe_dump(cfg))
    study = load_study(tmp_path / "study" / "study.yaml")
    batch = plan_batches(study)[0]
    (prices / "paper.yaml").write_text(NEGATIVE)
    d = Layout(study.results_dir).batch_dir(batch.key)
    before = digest(d)
    with pytest.raises(UserError, match=r"paper\.yaml: per_million_tokens\.input must be ≥ 0"):
        analyze_batch(study_of(SimpleNamespace(config=study.as_config())), batch,
                      outputs={n: d / f"{n}.parquet" for n in BATCH_FILES}, log=tmp_path / "a.log")
    assert digest(d) == before


@pytest.mark.parametrize("damage,words", [
    (lambda p: p.write_bytes(b"PAR1\x00\x00 torn by a full disk"), "not a readable Parquet file"),
    (lambda p: __import__("forgetting.records.schemas", fromlist=["x"]).write_table(
        pq.read_table(p).drop_columns(["resolved"]), p), "does not match its declared schema"),
])
def test_a_corrupt_dataset_stops_the_statistics_in_one_line_and_keeps_the_old_ones(
        template, tmp_path, run_cli, damage, words):
    study = fresh(template, tmp_path / "study")
    collect(study)
    config = tmp_path / "study" / "study.yaml"
    assert run_cli("report", config, "--only", "stats").returncode == 0
    stats = Layout(study.results_dir).stats
    before = digest(stats)
    damage(Layout(study.results_dir).dataset("runs"))
    proc = run_cli("report", config, "--only", "stats")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert f"{Layout(study.results_dir).dataset('runs')}: {words}" in proc.stderr
    assert digest(stats) == before


def test_a_corrupt_statistics_file_stops_the_tables_and_keeps_the_old_ones(template, tmp_path, run_cli):
    study = fresh(template, tmp_path / "study")
    collect(study)
    config = tmp_path / "study" / "study.yaml"
    assert run_cli("report", config, "--only", "stats", "--only", "tables").returncode == 0
    layout = Layout(study.results_dir)
    before = digest(layout.tables)
    (layout.stats / "effects.parquet").write_bytes(b"not parquet at all")
    proc = run_cli("report", config, "--only", "tables")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert f"{layout.stats / 'effects.parquet'}: not a readable Parquet file" in proc.stderr
    assert digest(layout.tables) == before


def test_run_output_faults_do_not_hide_in_the_template(template):
    """The mutations apply to a run that exists and has what they change (the tests above would
    otherwise pass vacuously)."""
    d = template / "runs" / TARGET
    assert all((d / n).is_file() for n in ("calls.jsonl", "trajectory.json", "run.json", "eval.json"))
    assert any(json.loads(line).get("deleted") for line in lines_of(d / "calls.jsonl"))
    assert json.loads((template / "runs" / TRAE_TWIN / "trajectory.json").read_text())["llm_interactions"]
