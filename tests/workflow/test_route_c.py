"""Cluster route C as Snakemake would submit it (a dry run with the cluster profile, nothing
submitted): ``config/route-c.yaml`` over the study and the documented ``--set-resources``
put the batch jobs on the CPU partition without a GPU, capped by a global resource, reading
the agents' and instance images but not the vLLM server's (the server is a job of its own);
the agents' images are built on the CPU partition, where they run, and the batches wait for
that partition's preflight, which checks them."""

from __future__ import annotations

from pathlib import Path

import yaml

from forgetting.config import merge_configs
from forgetting_testkit.checkout import ROOT
from forgetting_testkit.dryrun import by_rule, dry_run, study_config

DOCUMENTED = ("--set-resources", "run_batch:slurm_partition=cpu-x86", "run_batch:gpu=0", "run_batch:cpus_per_task=16",
              "run_batch:mem_mb=64000", "run_batch:endpoint=1", "--resources", "endpoint=8")


def test_route_c_batches_go_to_the_cpu_partition_without_a_gpu_or_the_server_image(tmp_path):
    cfg = study_config(tmp_path)
    tasks = [t for t in (ROOT / "resources/tasks/swe-bench-verified-100.txt").read_text().split() if "__" in t][:2]
    cfg["tasks"] = {"ids": tasks}
    cfg["configurations"] = {"names": ["delayed-turn-tool_output-50"]}
    cfg = merge_configs(cfg, yaml.safe_load((ROOT / "config" / "route-c.yaml").read_text()))
    assert cfg["model"]["backend"] == "endpoint"
    jobs = dry_run(cfg, tmp_path, *DOCUMENTED)
    batches = by_rule(jobs, "run_batch")
    assert len(batches) == 4  # 2 agents × (baseline + 1 configuration)
    for job in batches:
        r = job.resources
        assert (r["slurm_partition"], r["gpu"], r["cpus_per_task"], r["mem_mb"], r["endpoint"]) == (
            "cpu-x86", "0", "16", "64000", "1")
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
