"""Cluster route C as Snakemake would submit it (a dry run with the cluster profile, nothing
submitted): ``config/route-c.yaml`` over the study and the documented ``--set-resources``
put the batch jobs on the CPU partition without a GPU, capped by a global resource, reading
the agents' and instance images but not the vLLM server's (the server is a job of its own)."""

from __future__ import annotations

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
    built = {out for job in by_rule(jobs, "build_image") for out in job.output}
    assert built and not any(p.endswith("vllm.sif") for p in built)
