"""Cluster route C as Snakemake would submit it (a dry run with the cluster profile, nothing
submitted): ``config/route-c.yaml`` over the study and docs/cluster.md's command as written
put the batch jobs on the CPU partition without a GPU (their own rule, run_batch_endpoint, in
the profile's set-resources), every other rule keeping its profile entry, capped by a global
resource, reading
the agents' and instance images but not the vLLM server's (the server is a job of its own);
the agents' images are built on the CPU partition, where they run, and the batches wait for
that partition's preflight, which checks them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
import yte

from forgetting.study.config import merge_configs
from forgetting_testkit.checkout import ROOT, cli_env
from forgetting_testkit.dryrun import PROFILE, SITE_HOST_ARCH, by_rule, dry_run, snakemake_cmd, study_config
from forgetting_testkit.rehearsal import documented_snakemake


def documented_options() -> tuple[str, ...]:
    """The options of docs/cluster.md's route-C command after its config files, as written."""
    argv = documented_snakemake(ROOT / "docs" / "cluster.md", "snakemake --profile profiles/slurm --configfile "
                                "config/config.yaml config/route-c.yaml")
    return tuple(argv[argv.index("config/route-c.yaml") + 1:])


DOCUMENTED = documented_options()
#: the cluster profile as Snakemake renders it
SLURM = yte.process_yaml((PROFILE / "config.yaml").read_text(), require_use_yte=True)


def test_route_c_batches_go_to_the_cpu_partition_without_a_gpu_or_the_server_image(tmp_path):
    cfg = study_config(tmp_path)
    tasks = [t for t in (ROOT / "resources/tasks/swe-bench-verified-100.txt").read_text().split() if "__" in t][:2]
    cfg["tasks"] = {"ids": tasks}
    cfg["configurations"] = {"names": ["delayed-turn-tool_output-50"]}
    cfg = merge_configs(cfg, yaml.safe_load((ROOT / "config" / "route-c.yaml").read_text()))
    assert cfg["model"]["backend"] == "endpoint"
    jobs = dry_run(cfg, tmp_path, *DOCUMENTED)
    assert not by_rule(jobs, "run_batch")
    batches = by_rule(jobs, "run_batch_endpoint")
    assert len(batches) == 4  # 2 agents × (baseline + 1 configuration)
    for job in batches:
        r = job.resources
        assert job.rule == "run_batch_endpoint" and "gpu" not in r
        assert (r["slurm_partition"], r["cpus_per_task"], r["mem_mb"], r["endpoint_runs"]) == (
            SLURM["x-site"]["cpu_partition"], "16", "64000", str(cfg["execution"]["concurrency"]))
        assert not any(p.endswith("vllm.sif") for p in job.input)  # the server is not the batch's
        assert any("/.pulled/" in p for p in job.input)  # the agents work in the instance images
        assert any("/preflight/cpu-" in p for p in job.input)  # the agents' partition's preflight
        assert not any("/preflight/gpu-" in p for p in job.input)
    built = {Path(out).name: job for job in by_rule(jobs, "build_gpu_image") + by_rule(jobs, "build_cpu_image")
             for out in job.output}
    assert "vllm.sif" not in built  # the batches never need it
    assert built["trae-agent.sif"].rule == "build_cpu_image"  # built where it runs: the CPU partition
    assert built["trae-agent.sif"].resources["slurm_partition"] == by_rule(jobs, "preflight_cpu")[0].resources[
        "slurm_partition"]


def test_route_c_preflight_checks_the_server_on_the_gpu_partition_and_the_agents_on_the_cpu_one(tmp_path):
    cfg = merge_configs(study_config(tmp_path), yaml.safe_load((ROOT / "config" / "route-c.yaml").read_text()))
    jobs = dry_run(cfg, tmp_path, *DOCUMENTED, "--", "preflight")
    (gpu,), (cpu,) = by_rule(jobs, "preflight_gpu"), by_rule(jobs, "preflight_cpu")
    assert sorted(Path(p).name for p in gpu.input) == ["vllm.sif"]  # the server job's image only
    assert "trae-agent.sif" in {Path(p).name for p in cpu.input}  # the agents run there
    built = {Path(out).name: job.rule for job in jobs if job.rule.startswith("build_") for out in job.output}
    assert built == {"vllm.sif": "build_gpu_image", "trae-agent.sif": "build_cpu_image"}


def test_the_documented_command_keeps_every_rule_on_its_partition_with_its_resources(tmp_path):
    """Read back from the documented command's dry run: each job has exactly the resources the
    profile's set-resources (over default-resources) give its rule — no entry clobbered."""
    cfg = merge_configs(study_config(tmp_path), yaml.safe_load((ROOT / "config" / "route-c.yaml").read_text()))
    jobs = []
    for target in ((), ("--", "images"), ("--", "preflight")):
        jobs += dry_run(cfg, tmp_path, *DOCUMENTED, *target)
    seen = set()
    for job in jobs:
        if job.rule not in SLURM["set-resources"]:
            continue  # local rules (all, plan, images, preflight)
        # a batch's runtime is the workflow's own, derived from its runs (over default-resources)
        defaults = {k: v for k, v in SLURM["default-resources"].items()
                    if not (job.rule == "run_batch_endpoint" and k == "runtime")}
        want = {**defaults, **SLURM["set-resources"][job.rule]}
        for key, value in want.items():
            assert job.resources.get(key) == str(value), (job.rule, key, job.resources.get(key), value)
        seen.add(job.rule)
    assert {"run_batch_endpoint", "evaluate_batch", "build_gpu_image", "build_cpu_image", "preflight_gpu",
            "preflight_cpu", "pull_swebench_images", "collect"} <= seen, seen


@pytest.mark.parametrize(("options", "said"), [
    ((), "none given"),
    (("--resources", "endpoint_runs=28"), "28 given"),
])
def test_route_c_without_a_fitting_cap_on_runs_in_flight_stops_before_any_job(tmp_path, options, said):
    """The runs in flight of all batch jobs together are bounded by what the one server's KV
    cache holds (model.endpoint.runs_in_flight): a missing or larger endpoint_runs is named in
    the dry run and stops a real run at onstart, before the first submission."""
    cfg = merge_configs(study_config(tmp_path), yaml.safe_load((ROOT / "config" / "route-c.yaml").read_text()))
    cap = cfg["model"]["endpoint"]["runs_in_flight"]
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(cfg))
    line = f"model.endpoint.runs_in_flight is {cap}: pass --resources endpoint_runs={cap}"
    for dry in (True, False):
        proc = subprocess.run(
            snakemake_cmd(*(("-n",) if dry else ()), "--configfile", str(tmp_path / "study.yaml"), *options,
                          "--", "preflight"),
            cwd=ROOT, env=cli_env(SITE_HOST_ARCH), capture_output=True, text=True, timeout=300)
        log = proc.stdout + proc.stderr
        assert f"warning: {line}" in log and said in log, log[-2000:]
        if dry:
            assert proc.returncode == 0, log[-2000:]
        else:
            assert proc.returncode != 0 and "no job submitted" in log, log[-2000:]
            assert "submitted with SLURM jobid" not in log
