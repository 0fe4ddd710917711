"""Through a real Slurm: the single-node cluster of scripts/setup-slurm.sh (partition ``debug``,
one scheduler-level fake GPU), with the cluster profile and CI's site values on top of it
(``--profile profiles/slurm --workflow-profile profiles/slurm-ci``).

``scripts/test`` starts that cluster when it runs as root with apt-get and stops it after;
elsewhere these tests skip, saying why.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from forgetting_testkit.checkout import ROOT, bin_path, cli_env
from forgetting_testkit.dryrun import CI_PROFILE, PROFILE, snakemake_cmd

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

SUBMITTED = re.compile(r"submitted with SLURM jobid (?P<id>\d+) \(log: \S*/slurm_logs/(?P<what>rule_\w+|group_\w+)/")


def cluster_problem() -> str | None:
    """Why no Slurm cluster can take jobs here, or None."""
    reason = os.environ.get("FORGETTING_SLURM_SKIP")
    if reason:
        return reason
    if shutil.which("sbatch") is None or shutil.which("sinfo") is None:
        return "no Slurm here (sbatch/sinfo not found); scripts/test starts one when run as root with apt-get"
    proc = subprocess.run(["sinfo", "-h", "-o", "%P %a %G"], capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        return f"no Slurm controller answers (sinfo: {proc.stderr.strip()[:200]})"
    if not re.search(r"^debug\*? up gpu:", proc.stdout, re.MULTILINE):
        return f"no partition 'debug' with a GPU GRES (sinfo: {proc.stdout.strip()[:200]}); see scripts/setup-slurm.sh"
    return None


@pytest.fixture(scope="module")
def slurm():
    problem = cluster_problem()
    if problem:
        pytest.skip(problem)


def run_snakemake(*args: str, cwd: Path, timeout: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(snakemake_cmd(*args, profiles=(PROFILE, CI_PROFILE)), cwd=cwd, env=cli_env(),
                          capture_output=True, text=True, timeout=timeout)


def submissions(log: str) -> dict[str, list[int]]:
    """Slurm job ids per rule (``rule_NAME``) or group (``group_NAME``), from Snakemake's log."""
    out: dict[str, list[int]] = {}
    for m in SUBMITTED.finditer(log):
        out.setdefault(m.group("what"), []).append(int(m.group("id")))
    return out


FLAKY = """\
rule all:
    input: "out/flaky.txt", "out/gpu.txt"

rule flaky:
    output: "out/flaky.txt"
    shell:
        "if [ ! -e out/.failed-once ]; then mkdir -p out; touch out/.failed-once; exit 1; fi; "
        "echo $SLURM_JOB_ID > {output}"

# named like the workflow's GPU rule, so the profiles' GPU request applies to it
rule run_batch:
    output: "out/gpu.txt"
    shell: "echo $SLURM_JOB_ID $CUDA_VISIBLE_DEVICES > {output}"
"""


def test_a_failing_job_is_resubmitted_through_sbatch_per_the_profile(slurm, tmp_path):
    (tmp_path / "Snakefile").write_text(FLAKY)
    (tmp_path / "empty.yaml").write_text("{}\n")
    proc = run_snakemake("--configfile", "empty.yaml", cwd=tmp_path, timeout=600)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    jobs = submissions(log)
    # the first attempt failed inside Slurm and the profile's retries submitted it again
    assert len(jobs["rule_flaky"]) == 2 and len(set(jobs["rule_flaky"])) == 2, jobs
    assert int((tmp_path / "out" / "flaky.txt").read_text()) == jobs["rule_flaky"][1]
    # the GPU rule got the fake GRES: Slurm set CUDA_VISIBLE_DEVICES in the job
    slurm_id, cuda = (tmp_path / "out" / "gpu.txt").read_text().split()
    assert [int(slurm_id)] == jobs["rule_run_batch"] and cuda == "0"


def _demo_missing() -> str | None:
    if importlib.util.find_spec("forgetting.run") is None:
        return "forgetting.run (the agent runner, issue 5) is not in this checkout: no demo run can start"
    if not (ROOT / "resources" / "demo" / "tasks.txt").is_file():
        return "the demo tasks (resources/demo/tasks.txt, issue 4) are not in this checkout"
    return None


def _tables(batch_dir: Path, results: Path) -> dict[str, list[dict]]:
    """The batch's analysis tables as rows, with the results directory written as '<results>'
    (not the wall-clock timings, which differ between any two runs)."""
    out = {}
    for path in sorted(batch_dir.glob("*.parquet")):
        if path.name == "timings.parquet":
            continue
        rows = pq.read_table(path).to_pylist()
        out[path.name] = [
            {k: v.replace(str(results), "<results>") if isinstance(v, str) else v for k, v in row.items()}
            for row in rows
        ]
    return out


@pytest.mark.skipif(_demo_missing() is not None, reason=str(_demo_missing()))
def test_the_demo_through_slurm_equals_the_local_run(slurm, tmp_path):
    demo = yaml.safe_load((ROOT / "config" / "demo.yaml").read_text())
    configuration = next(n for n in demo["configurations"]["names"] if n != "baseline")
    narrow = ["--config", f"only={configuration}", "only_agents=mini"]
    results = {}
    for where in ("local", "slurm"):
        cfg = {**demo, "study": {**demo["study"], "results_dir": str(tmp_path / where)}}
        (tmp_path / f"{where}.yaml").write_text(yaml.safe_dump(cfg))
        results[where] = tmp_path / where
    local = subprocess.run(
        [bin_path("snakemake"), "--profile", "profiles/local", "--configfile", str(tmp_path / "local.yaml"),
         *narrow], cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=1200,
    )
    assert local.returncode == 0, (local.stdout + local.stderr)[-4000:]
    proc = run_snakemake("--configfile", str(tmp_path / "slurm.yaml"), *narrow, cwd=ROOT, timeout=1200)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    jobs = submissions(log)
    # every job went through sbatch: the batch, and the "post" group (evaluate + analyze) whose
    # Slurm job name Snakemake builds from the group and its rules
    assert jobs.get("rule_run_batch") and any(k.startswith("group_post") for k in jobs), jobs

    batches = sorted(p.relative_to(results["local"] / "batches")
                     for p in (results["local"] / "batches").glob("*/*/*"))
    assert batches and batches == sorted(p.relative_to(results["slurm"] / "batches")
                                         for p in (results["slurm"] / "batches").glob("*/*/*"))
    for batch in batches:
        assert _tables(results["slurm"] / "batches" / batch, results["slurm"]) == _tables(
            results["local"] / "batches" / batch, results["local"]), batch
    runs = sorted(p.parent.relative_to(results["local"]) for p in results["local"].glob("runs/*/*/*/*/run.json"))
    assert runs
    for run in runs:
        for name in ("patch.diff",):
            assert (results["slurm"] / run / name).read_bytes() == (results["local"] / run / name).read_bytes()
        status = [yaml.safe_load((results[w] / run / "eval.json").read_text())["status"] for w in ("local", "slurm")]
        assert status[0] == status[1], run
