"""Time ``snakemake -n`` on the full study's DAG (config/config.yaml: 9,400 runs).

Prints the wall time, peak memory and job count of the project's batched DAG, dry-run with
the cluster profile (``--profile profiles/slurm``), and the number of Slurm submissions it
would make after grouping (group ``post``: ``group-components`` in the profile); then the same
for a naive DAG of the same study with one job per run per stage (run, evaluate, label,
cost: 37,600 jobs + collect), generated in a temporary directory, with their ratio.
Target (issues 2 and 10): ≤ 10 s on a 2-core machine for the batched DAG; ≤ 200 submissions.

    python benchmarks/dag.py [--skip-naive] [--profile profiles/slurm]
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import env_with_src, measure_isolated

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "testkit" / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
from forgetting_testkit.submissions import submissions_of

ROOT = Path(__file__).resolve().parent.parent
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")

NAIVE = """
import sys
sys.path.insert(0, {src!r})
from forgetting.study.config import load_study
from forgetting.study.plan import plan_runs
STUDY = load_study({config!r})
RUNS = [r.run_id for r in plan_runs(STUDY)]
wildcard_constraints:
    agent="[a-z-]+", conf="[a-z0-9_.-]+", task="[A-Za-z0-9_.-]+", rep=r"\\d+"
rule all:
    input: "datasets/runs.parquet"
rule collect:
    input: expand("runs/{{r}}/cost.parquet", r=RUNS), expand("runs/{{r}}/labels.parquet", r=RUNS)
    output: "datasets/runs.parquet"
    shell: "touch {{output}}"
rule run:
    output: "runs/{{agent}}/{{conf}}/{{task}}/{{rep}}/run.json"
    shell: "touch {{output}}"
rule evaluate:
    input: "runs/{{agent}}/{{conf}}/{{task}}/{{rep}}/run.json"
    output: "runs/{{agent}}/{{conf}}/{{task}}/{{rep}}/eval.json"
    shell: "touch {{output}}"
rule label:
    input: "runs/{{agent}}/{{conf}}/{{task}}/{{rep}}/eval.json"
    output: "runs/{{agent}}/{{conf}}/{{task}}/{{rep}}/labels.parquet"
    shell: "touch {{output}}"
rule cost:
    input: "runs/{{agent}}/{{conf}}/{{task}}/{{rep}}/eval.json"
    output: "runs/{{agent}}/{{conf}}/{{task}}/{{rep}}/cost.parquet"
    shell: "touch {{output}}"
"""


def job_count(stdout: str) -> int:
    m = re.search(r"^total\s+(\d+)", stdout, re.MULTILINE)
    return int(m.group(1)) if m else -1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--skip-naive", action="store_true", help="do not time the naive per-run DAG (~30 s)")
    ap.add_argument("--profile", default="profiles/slurm", help="the profile of the dry-run (default: %(default)s)")
    args = ap.parse_args()
    env = env_with_src(str(ROOT))
    cmd = [SNAKEMAKE, "-n", "--profile", args.profile]
    note = ""
    if shutil.which("conda") is None:
        # a conda deployment's dry-run asks `conda info`; without conda, deploy nothing (same DAG)
        cmd += ["--software-deployment-method", "apptainer"]
        note = " (no conda here: --software-deployment-method apptainer)"
    with tempfile.TemporaryDirectory() as shadow:
        # a throwaway results dir, so the benchmark sees the whole DAG whatever exists locally
        cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
        cfg["study"]["results_dir"] = f"{shadow}/results"
        (Path(shadow) / "config.yaml").write_text(yaml.safe_dump(cfg))
        cmd += ["--configfile", f"{shadow}/config.yaml"]
        ours = measure_isolated(cmd, cwd=str(ROOT), env=env)
    if ours.returncode != 0:
        print(ours.stderr[-2000:], file=sys.stderr)
        return 1
    print(f"batched DAG (config/config.yaml, --profile {args.profile}{note}): {ours.seconds:.2f} s, "
          f"peak {ours.peak_mb:.0f} MB, {job_count(ours.stdout)} jobs  (target <= 10 s)")
    subs = submissions_of(ours.stdout, ROOT)
    print(f"Slurm submissions after grouping: {subs.total}  (target <= 200; "
          f"{subs.ungrouped_total} without grouping)")
    for line in subs.lines():
        print(f"    {line}")
    if args.skip_naive:
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        snakefile = Path(tmp) / "Snakefile"
        snakefile.write_text(NAIVE.format(src=str(ROOT / "src"), config=str(ROOT / "config" / "config.yaml")))
        naive = measure_isolated([SNAKEMAKE, "-n", "--cores", "2", "-s", str(snakefile)], cwd=tmp, env=env)
    if naive.returncode != 0:
        print(naive.stderr[-2000:], file=sys.stderr)
        return 1
    print(f"naive per-run DAG:                {naive.seconds:.2f} s, peak {naive.peak_mb:.0f} MB, "
          f"{job_count(naive.stdout)} jobs")
    print(f"ratio naive/batched: {naive.seconds / ours.seconds:.1f}x time, {naive.peak_mb / ours.peak_mb:.1f}x memory")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
