"""The whole embedded demo, timed: ``snakemake --profile profiles/local`` into a fresh results
directory, with the time of every stage and of the runs themselves.

Prints the total wall time and CPU time, per rule the number of jobs, the span from its
first job's start to its last job's end and the summed job time; per run the wall time,
turns and model time (from ``run.json``); and the runner's isolation against the naive way:
how long a run takes until its first model call when forked from a batch process that
imported mini-swe-agent and litellm once, against a fresh interpreter per run (which pays
that import every time).

    python benchmarks/demo.py                # the whole demo (config/demo.yaml): 160 runs
    python benchmarks/demo.py --until run_batch
    python benchmarks/demo.py --keep DIR     # keep the results in DIR

The target is the whole demo in at most 6 minutes on 2 cores. The machine's load (other
processes) counts against the wall time: the CPU time is the steadier figure.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path

from forgetting.records import RunRecord, read_run_record

ROOT = Path(__file__).resolve().parent.parent

_STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
_RULE = re.compile(r"^(?:local)?(?:rule|checkpoint) (\S+):$")
_JOBID = re.compile(r"^\s+jobid: (\d+)$")
_FINISHED = re.compile(r"^Finished jobid: (\d+) \(Rule: (\S+)\)$")


def parse_jobs(log: str) -> dict[str, list[tuple[float, float]]]:
    """Per rule, (start, end) of every job, from Snakemake's own progress output."""
    now = 0.0
    pending_rule = None
    started: dict[str, tuple[str, float]] = {}
    jobs: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for line in log.splitlines():
        if m := _STAMP.match(line.strip()):
            now = datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y").timestamp()
        elif m := _RULE.match(line.strip()):
            pending_rule = m.group(1)
        elif (m := _JOBID.match(line)) and pending_rule:
            started[m.group(1)] = (pending_rule, now)
            pending_rule = None
        elif m := _FINISHED.match(line.strip()):
            rule, t0 = started.pop(m.group(1), (m.group(2), now))
            jobs[rule].append((t0, now))
    return jobs


def run_figures(results: Path) -> list[RunRecord]:
    return [read_run_record(p) for p in sorted(results.glob("runs/*/*/*/*/run.json"))]


def first_call_delay(results: Path) -> list[float]:
    """Seconds from a run's start to its first model call (fork, workspace, proxy, agent set-up)."""
    out = []
    for run_json in sorted(results.glob("runs/*/*/*/*/run.json")):
        started = read_run_record(run_json).started
        with open(run_json.parent / "calls.jsonl", encoding="utf-8") as fh:
            for line in fh:
                if '"type":"call"' in line:
                    out.append(json.loads(line)["t_request"] - started)
                    break
    return out


def fresh_interpreter_import_s(repeats: int = 3) -> float:
    """What a fresh interpreter per run pays before its agent can start: importing
    mini-swe-agent and litellm (median of ``repeats``)."""
    code = ("import minisweagent.agents.default, minisweagent.models.litellm_model, "
            "minisweagent.models.litellm_textbased_model, minisweagent.environments.local")
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", MSWEA_SILENT_STARTUP="1", MSWEA_CONFIGURED="true",
               MSWEA_GLOBAL_CONFIG_DIR=tempfile.mkdtemp())
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], env=env, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--until", help="stop after this rule (snakemake --until)")
    parser.add_argument("--keep", help="results directory to use and keep (default: a temporary one)")
    parser.add_argument("--cores", type=int, default=2)
    args = parser.parse_args()

    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="forgetting-demo-bench-"))
    results = (work / "results").resolve()
    if results.exists():
        shutil.rmtree(results)
    overlay = work / "overlay.yaml"
    overlay.parent.mkdir(parents=True, exist_ok=True)
    overlay.write_text(f"study:\n  name: demo\n  seed: 7\n  results_dir: {results}\n")
    cmd = [str(Path(sys.executable).parent / "snakemake"), "--profile", "profiles/local", "--cores", str(args.cores),
           "--configfile", "config/demo.yaml", str(overlay)]
    if args.until:
        cmd += ["--until", args.until]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    print(f"$ {' '.join(cmd)}", flush=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        print(done.stdout[-3000:], done.stderr[-5000:], sep="\n")
        print(f"snakemake failed (status {done.returncode}) after {wall:.0f} s")
        return 1

    print(f"\nwhole demo{' until ' + args.until if args.until else ''}: {wall:.0f} s wall, {cpu:.0f} s CPU "
          f"on {args.cores} cores (load average now {os.getloadavg()[0]:.1f}); target <= 360 s")
    jobs = parse_jobs(done.stdout + "\n" + done.stderr)
    print(f"\n{'rule':<16}{'jobs':>6}{'span s':>9}{'job s':>9}")
    order = sorted(jobs, key=lambda r: min(t for t, _ in jobs[r]))
    for rule in order:
        spans = jobs[rule]
        span = max(e for _, e in spans) - min(s for s, _ in spans)
        print(f"{rule:<16}{len(spans):>6}{span:>9.0f}{sum(e - s for s, e in spans):>9.0f}")

    runs = run_figures(results)
    if runs:
        walls = [r.wall_s for r in runs]
        turns = [r.turns for r in runs]
        model = [r.model_s or 0 for r in runs]
        statuses: dict[str, int] = defaultdict(int)
        for r in runs:
            statuses[r.status] += 1
        print(f"\n{len(runs)} runs ({', '.join(f'{n} {s}' for s, n in sorted(statuses.items()))})")
        print(f"per run: wall median {statistics.median(walls):.2f} s, mean {statistics.mean(walls):.2f} s, "
              f"max {max(walls):.1f} s; turns median {statistics.median(turns):.0f}, max {max(turns)}; "
              f"model time mean {statistics.mean(model):.3f} s")
        delays = first_call_delay(results)
        naive = fresh_interpreter_import_s()
        ours = statistics.median(delays)
        print(f"start-up until the first model call: forked run {ours:.3f} s (median); a fresh interpreter per "
              f"run would first spend {naive:.2f} s importing mini-swe-agent and litellm: "
              f"{(naive + ours) / ours:.0f}x the forked start-up")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
