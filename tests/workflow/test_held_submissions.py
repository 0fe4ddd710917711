"""The launch rehearsal on the real Slurm: the real ``profiles/slurm`` with a site model's
values, the documented command's dry run through the real Snakemake, each job's ``sbatch`` line
built by the Slurm plugin's own code (``forgetting_testkit.rehearsal``) — then submitted held
(``sbatch -H``) to the single-node Slurm, whose scripts/setup-slurm.sh gives it the site models'
partitions on nodes of their size that never register. What Slurm itself recorded
(``scontrol show job``: partition, memory, time limit, CPUs, GPUs) must be what the profile asks
for each rule, and fit the site's partition; a job Slurm refuses (no such partition, a time
limit past the partition's) fails the rehearsal.

This is what catches a command line that replaces the profile's ``set-resources`` (issue 23,
finding 2): Snakemake's profile/CLI merge gives the key from the command line for every rule.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from forgetting_testkit.rehearsal import held_problems, load_site, rehearse, render_profile, submit_held
from tests.workflow.test_launch_rehearsal import IMAGE_ARCH, argv_for

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def site_partitions_problem() -> str | None:
    reason = os.environ.get("FORGETTING_SLURM_SKIP")
    if reason:
        return reason
    if os.geteuid() != 0:
        return "not root: scripts/setup-slurm.sh must start the single-node Slurm with the site partitions"
    if shutil.which("sbatch") is None or shutil.which("scontrol") is None:
        return "no Slurm here (sbatch/scontrol not found); scripts/test starts one when run as root with apt-get"
    proc = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, timeout=30)
    missing = {"gh200", "cpu", "gpu"} - {p.rstrip("*") for p in proc.stdout.split()}
    if proc.returncode != 0 or missing:
        return f"the single-node Slurm lacks the site partitions {sorted(missing)}; rerun scripts/setup-slurm.sh"
    return None


@pytest.fixture(scope="module", autouse=True)
def _slurm():
    problem = site_partitions_problem()
    if problem:
        pytest.skip(problem)


#: each route on a site model that runs it, the study's documented command (images, preflight,
#: pulls, batches, evaluation and the study's outputs are all in its DAG)
CASES = [("gh200-only", "A"), ("x86-gpu", "B"), ("gh200-x86-cpu", "C")]


def _held(site_name: str, route: str, tmp_path, extra: list[str] = ()):
    site = load_site(site_name)
    profile = render_profile(site, tmp_path / "profile")
    argv = [*argv_for(route, "study", str(profile), site), *extra]
    r = rehearse(site, profile, argv, IMAGE_ARCH[route])
    assert r.returncode == 0 and r.subs, r.log[-3000:]
    logs = tmp_path / "logs"
    logs.mkdir()
    held = submit_held(r.subs, logs)
    return site, profile, r, held


@pytest.mark.parametrize(("site_name", "route"), CASES)
def test_every_job_of_the_documented_command_lands_where_the_profile_says(site_name, route, tmp_path):
    site, profile, r, held = _held(site_name, route, tmp_path)
    assert {h.sub.rules for h in held} == {s.rules for s in r.subs}
    assert all(h.job_id is not None for h in held), [h.error for h in held if h.job_id is None]
    assert not held_problems(held, profile, site), "\n".join(held_problems(held, profile, site))
    gpu = {h.sub.rules[0]: h for h in held if h.gpus}
    assert all(h.partition == site.profile["gpu_partition"] for h in gpu.values()), gpu
    # route C serves the model by hand (docs/cluster.md): no GPU job in its DAG on this site
    assert set(gpu) == (set() if route == "C" else {"build_gpu_image", "preflight_gpu", "run_batch"}), set(gpu)


def test_a_set_resources_on_the_command_line_moves_the_other_rules_and_slurm_shows_it(tmp_path):
    """The route-C form docs/cluster.md once gave (`--set-resources` for the batch): Slurm then
    records the evaluation's group job and the image pulls with the defaults (4,000 MB, 60 min)."""
    site, profile, _, held = _held("gh200-x86-cpu", "C", tmp_path,
                                   ["--set-resources", "run_batch_endpoint:mem_mb=64000"])
    problems = held_problems(held, profile, site)
    assert any(p.startswith("group ") and "the profile asks" in p for p in problems), problems  # evaluate_batch
    assert any(p.startswith("pull_swebench_images") and "limit of 60 min, the profile asks 480" in p
               for p in problems), problems
