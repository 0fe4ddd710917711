"""The whole analysis of a paper-scale study — label, cost, collect, stats, tables, figures, report —
from run outputs to the HTML report, and the regeneration of tables and figures from the
collected Parquet datasets.

Data: the synthetic study of config/config.yaml (9,400 runs, `forgetting-synth`: call logs with
token ids, trajectories, evaluation reports in the real on-disk format). Made once with

    forgetting-synth config/config.yaml --out DIR          # ~13 min on 2 cores, ~10.5 GB

Everything runs through Snakemake with 2 cores, as a user regenerates a study from its run
outputs (``--config regenerate=true``), one stage at a time (``--until``), each timed with its
peak memory (the largest process: Snakemake or one of its jobs) and the CPU time it used. The
study's analysis outputs (batch tables, datasets, stats, tables, figures) are removed first;
its runs and manifests are kept.

    analyze   analyze_batch × 94: behaviour labels and re-fetches, cost reconstruction per run
    collect   the batch tables into datasets/{runs,calls,tool_calls,run_costs,timings}.parquet
    stats     paired bootstrap, 10,000 resamples (stats/*.parquet)
    tables    every table, CSV / Markdown / LaTeX / HTML
    figures   every figure, PDF / PNG
    report    snakemake --report (the HTML report with every table and figure)

Targets (issue 11): run outputs → report ≤ 10 min on 2 cores; tables and figures from the
collected Parquet ≤ 120 s (``forgetting report``: stats, tables, figures); peak memory < 8 GiB.
Then the analysis of one run split into reading, labelling and costing, on a sample, in process,
with the call log's reading against the naive way (the standard JSON parser, the log parsed
twice: once for the labels, once for the cost).

    python benchmarks/analysis.py --study DIR [--sample 300] [--skip-workflow]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
GIB = 1024**3


@dataclass
class Stage:
    name: str
    seconds: float
    cpu_s: float
    peak_mib: float
    target: str = ""


def run_measured(cmd: list[str], env: dict[str, str]) -> Stage:
    """Wall time, CPU time and peak RSS (largest process) of ``cmd`` and all it starts."""
    code = (
        "import json,subprocess,sys,time,resource;t=time.perf_counter();"
        "p=subprocess.run(json.loads(sys.argv[1]),capture_output=True,text=True);"
        "r=resource.getrusage(resource.RUSAGE_CHILDREN);"
        "print(json.dumps([time.perf_counter()-t,r.ru_utime+r.ru_stime,r.ru_maxrss,p.returncode,p.stderr[-3000:]]))"
    )
    raw = subprocess.run([sys.executable, "-c", code, json.dumps(cmd)], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True).stdout
    secs, cpu, peak_kb, rc, err = json.loads(raw)
    if rc != 0:
        raise SystemExit(f"failed ({rc}): {' '.join(cmd)}\n{err}")
    return Stage("", secs, cpu, peak_kb / 1024.0)


def reset(study_dir: Path) -> None:
    """Remove every analysis output (kept: the runs, their manifests and the plan)."""
    for batch_file in (study_dir / "batches").rglob("*.parquet"):
        batch_file.unlink()
    for name in ("datasets", "stats", "tables", "figures", "logs"):
        shutil.rmtree(study_dir / name, ignore_errors=True)
    (study_dir / "report.html").unlink(missing_ok=True)


def workflow(study_dir: Path, env: dict[str, str], cores: int) -> list[Stage]:
    config = str(study_dir / "study.yaml")
    base = [SNAKEMAKE, "all", "--cores", str(cores), "--configfile", config, "--quiet", "progress",
            "--config", "regenerate=true"]
    stages = []
    for name, until in (("analyze (label + cost)", "analyze_batch"), ("collect", "collect"),
                        ("stats", "stats"), ("tables", "tables"), ("figures", None)):
        cmd = [*base, "--until", until] if until else base
        s = run_measured(cmd, env)
        s.name = name
        stages.append(s)
        print(f"  {name:24s} {s.seconds:7.1f} s  cpu {s.cpu_s:7.1f} s  peak {s.peak_mib:6.0f} MiB", flush=True)
    s = run_measured([SNAKEMAKE, "analysis", "--cores", str(cores), "--configfile", config,
                      "--report", str(study_dir / "report.html"), "--config", "regenerate=true"], env)
    s.name = "report (snakemake --report)"
    stages.append(s)
    print(f"  {s.name:24s} {s.seconds:7.1f} s  cpu {s.cpu_s:7.1f} s  peak {s.peak_mib:6.0f} MiB", flush=True)
    return stages


def regenerate(study_dir: Path, env: dict[str, str]) -> list[Stage]:
    config = str(study_dir / "study.yaml")
    out = []
    for only in ("stats", "tables", "figures"):
        s = run_measured([sys.executable, "-m", "forgetting", "report", config, "--only", only], env)
        s.name = only
        out.append(s)
    total = run_measured([sys.executable, "-m", "forgetting", "report", config], env)
    total.name = "forgetting report (all three)"
    out.append(total)
    return out


def per_run(study_dir: Path, sample: int) -> dict[str, float]:
    """Milliseconds per run of each part of analyze_run, in this process, on a sample."""
    from forgetting.analyze.batch import analyze_run
    from forgetting.behaviour import label_run
    from forgetting.cost import cost_run
    from forgetting.foundation.layout import Layout
    from forgetting.records import calllog
    from forgetting.study.config import load_study
    from forgetting.study.plan import plan_runs

    study = load_study(study_dir / "study.yaml")
    profiles, primary = study.pricing.profiles, study.pricing.primary
    runs = random.Random(7).sample(plan_runs(study), sample)
    layout = Layout(study.results_dir)
    opts = study.analysis.label_options()
    times = {"read call log": 0.0, "naive read (json, twice)": 0.0, "label (behaviour)": 0.0, "cost": 0.0,
             "analyze_run (all)": 0.0}
    size = 0
    for run in runs:
        d = layout.run_dir(run.run_id)
        size += sum(p.stat().st_size for p in d.iterdir() if p.is_file())
        calllog._LAST.clear()
        t = time.perf_counter()
        calllog.read_call_log(d / "calls.jsonl")
        times["read call log"] += time.perf_counter() - t
        t = time.perf_counter()
        for _ in range(2):  # what the analysis did before: the standard parser, once for labels, once for cost
            for line in (d / "calls.jsonl").read_bytes().splitlines():
                json.loads(line)
        times["naive read (json, twice)"] += time.perf_counter() - t
        t = time.perf_counter()
        label_run(d, **opts)
        times["label (behaviour)"] += time.perf_counter() - t
        t = time.perf_counter()
        cost_run(d, profiles, primary=primary, run_id=run.run_id)
        times["cost"] += time.perf_counter() - t
        calllog._LAST.clear()
        t = time.perf_counter()
        analyze_run(study, run, profiles=profiles, primary=primary)
        times["analyze_run (all)"] += time.perf_counter() - t
    out = {k: 1000 * v / sample for k, v in times.items()}
    out["MB per run"] = size / sample / 1e6
    return out


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "?")
    mem = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
               if line.startswith("MemTotal")) / 1024**2
    return f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB RAM, Python {sys.version.split()[0]}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--study", required=True, type=Path, help="a synthetic study made by `forgetting-synth`")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--sample", type=int, default=300, help="runs for the per-run breakdown")
    ap.add_argument("--skip-workflow", action="store_true", help="only the regeneration and the breakdown")
    args = ap.parse_args()
    study_dir = args.study.resolve()
    record = json.loads((study_dir / "synth.json").read_text())
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    print(f"machine: {machine()}; {time.strftime('%Y-%m-%d')}")
    print(f"study: {record['plan']}; {record['bytes'] / 1e9:.2f} GB of run outputs (synthetic)")
    if not args.skip_workflow:
        reset(study_dir)
        print(f"run outputs → report, snakemake --cores {args.cores} --config regenerate=true:")
        stages = workflow(study_dir, env, args.cores)
        total = sum(s.seconds for s in stages)
        peak = max(s.peak_mib for s in stages)
        print(f"  {'total':24s} {total:7.1f} s  (target ≤ 600 s)  peak {peak:.0f} MiB (target < {8 * 1024} MiB)")
    print("tables and figures from the collected Parquet, forgetting report:")
    regen = regenerate(study_dir, env)
    for s in regen:
        print(f"  {s.name:30s} {s.seconds:7.1f} s  cpu {s.cpu_s:7.1f} s  peak {s.peak_mib:6.0f} MiB")
    print(f"  (target ≤ 120 s for all three: {'met' if regen[-1].seconds <= 120 else 'MISSED'})")
    print(f"one run's analysis, in process, mean over {args.sample} runs:")
    parts = per_run(study_dir, args.sample)
    for k, v in parts.items():
        print(f"  {k:24s} {v:8.1f} {'' if k.startswith('MB') else 'ms'}")
    print(f"  call-log reading: {parts['naive read (json, twice)'] / parts['read call log']:.1f}x faster than the "
          "naive way (orjson, parsed once per run and shared by labels and cost)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
