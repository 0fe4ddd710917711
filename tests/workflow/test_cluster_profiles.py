"""The Slurm profiles: the cluster profile's settings, the CI profile as an override of its site
values only, and what Snakemake makes of the two together (read from dry-runs)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import yaml
import yte

from forgetting_testkit.checkout import ROOT
from forgetting_testkit.dryrun import CI_PROFILE, PROFILE, by_rule, dry_run, dry_run_text, small_study, study_config
from forgetting_testkit.submissions import local_rules, parse_dry_run, submissions_of, workflow_files

#: the cluster profile as Snakemake reads it: a YTE template (its `?…` values computed from x-site)
SLURM = yte.process_yaml((PROFILE / "config.yaml").read_text(), require_use_yte=True)
CI = yaml.safe_load((CI_PROFILE / "config.yaml").read_text())
#: the keys CI may override: where and how big jobs are, and how this single node is reached
SITE_KEYS = {
    "configfile", "jobs", "cores", "latency-wait", "default-resources", "set-resources",
    "slurm-status-command", "slurm-init-seconds-before-status-checks", "slurm-no-account",
    "software-deployment-method",
}


def rules_of_workflow() -> set[str]:
    text = "\n".join(p.read_text() for p in workflow_files(ROOT))
    return set(re.findall(r"^rule (\w+):", text, re.MULTILINE))


def test_cluster_profile_settings():
    assert SLURM["executor"] == "slurm"
    assert SLURM["retries"] >= 1 and SLURM["slurm-requeue"] is True
    assert SLURM["keep-going"] is True and SLURM["rerun-incomplete"] is True
    assert SLURM["rerun-triggers"] == ["mtime", "input"]
    assert 10 <= SLURM["jobs"] <= 200
    assert set(SLURM["software-deployment-method"]) == {"conda", "apptainer"}
    assert SLURM["group-components"] == {"post": 4}
    # per-rule runtimes for every rule that is submitted
    submitted = rules_of_workflow() - local_rules(workflow_files(ROOT))
    assert submitted == set(SLURM["set-resources"]), submitted ^ set(SLURM["set-resources"])
    # a runtime for every one of them; run_batch's is the workflow's own, derived per batch
    assert all("runtime" in res for rule, res in SLURM["set-resources"].items()
               if rule not in ("run_batch", "run_batch_endpoint"))
    # route C's batch rule: the CPU partition (default-resources), no GPU, its own size
    endpoint = SLURM["set-resources"]["run_batch_endpoint"]
    assert "gpu" not in endpoint and "slurm_partition" not in endpoint and "runtime" not in endpoint
    # every rule on the GPU partition says the partition's architecture, the others inherit the CPU one's
    for rule, res in SLURM["set-resources"].items():
        if res.get("slurm_partition") == SLURM["x-site"]["gpu_partition"]:
            assert res["partition_arch"] == SLURM["x-site"]["gpu_partition_arch"], rule
    assert SLURM["default-resources"]["partition_arch"] == SLURM["x-site"]["cpu_partition_arch"]
    assert SLURM["set-resources"]["build_gpu_image"]["gpu"] == 1  # sites reject GPU-less jobs on GPU partitions
    gpu = SLURM["set-resources"]["run_batch"]
    assert gpu["gpu"] == 1 and gpu["slurm_partition"] == SLURM["x-site"]["gpu_partition"]
    assert "cpus_per_task" not in SLURM["default-resources"]  # rules' threads reach --cpus-per-task
    assert "runtime" not in gpu  # derived per batch by the workflow (forgetting.run.gpu_time)
    # the GPU-side images are built where their code runs
    assert SLURM["set-resources"]["build_gpu_image"]["slurm_partition"] == SLURM["x-site"]["gpu_partition"]
    assert SLURM["set-resources"]["preflight_gpu"]["slurm_partition"] == SLURM["x-site"]["gpu_partition"]


def test_a_batch_job_gets_its_gpus_share_of_a_node():
    """Four one-GPU batch jobs fit a 4-GPU node: CPUs and memory are the node's, times the job's
    GPUs over the node's (the site's three values, stated once in x-site)."""
    site, gpu = SLURM["x-site"], SLURM["set-resources"]["run_batch"]
    share = site["gpu_count"] / site["gpu_node_gpus"]
    assert share == 1 / 4
    assert gpu["cpus_per_task"] == site["gpu_node_cpus"] // 4 and gpu["mem_mb"] == site["gpu_node_mem_mb"] // 4
    assert site["gpu_node_gpus"] * gpu["mem_mb"] <= site["gpu_node_mem_mb"]
    assert site["gpu_node_gpus"] * gpu["cpus_per_task"] <= site["gpu_node_cpus"]
    assert gpu["cpus_per_task"] >= 16  # execution.concurrency of the study: one agent and proxy per core
    # one site value changed, the shares follow (YTE, as Snakemake renders the profile)
    text = (PROFILE / "config.yaml").read_text().replace("gpu_node_cpus: 288", "gpu_node_cpus: 144")
    assert yte.process_yaml(text, require_use_yte=True)["set-resources"]["run_batch"]["cpus_per_task"] == 36


def test_site_values_are_placeholders_set_in_one_place():
    text = (PROFILE / "config.yaml").read_text()
    site = SLURM["x-site"]
    assert site["cpu_partition"].startswith("CHANGE-ME") and site["account"].startswith("CHANGE-ME")
    # every placeholder literal appears once, in the site block; everything else refers to anchors
    for value in ("CHANGE-ME-cpu", "CHANGE-ME-gh200", "CHANGE-ME-account"):
        assert text.count(value) == 1
    assert SLURM["default-resources"]["slurm_partition"] == site["cpu_partition"]
    assert SLURM["default-resources"]["slurm_account"] == site["account"]


def test_ci_profile_overrides_site_values_only():
    assert set(CI) <= SITE_KEYS, set(CI) - SITE_KEYS
    assert CI["slurm-status-command"] == "squeue"
    assert CI["configfile"] == "config/demo.yaml"
    assert CI["default-resources"]["slurm_partition"] == "debug"
    assert set(CI["set-resources"]) == set(SLURM["set-resources"])  # a CI size for every rule
    for res in CI["set-resources"].values():
        assert res.get("cpus_per_task", 1) <= CI["cores"] == 2


def test_snakemake_applies_the_ci_overrides_on_top_of_the_cluster_profile(tmp_path):
    cfg = small_study(tmp_path)
    alone = dry_run(cfg, tmp_path)
    both = dry_run(cfg, tmp_path, profiles=(PROFILE, CI_PROFILE))
    (run,) = by_rule(alone, "run_batch")[:1]
    assert run.resources["slurm_partition"] == SLURM["x-site"]["gpu_partition"]
    assert run.resources["runtime"] == str(derived_runtime(cfg, 2)) and run.resources["gpu"] == "1"
    assert (run.resources["cpus_per_task"], run.resources["mem_mb"]) == ("72", "115000")
    for job in both:
        assert job.resources["slurm_partition"] == "debug", job
        assert "slurm_account" not in job.resources
    (run,) = by_rule(both, "run_batch")[:1]
    assert (run.resources["gpu"], run.resources["runtime"], run.resources["cpus_per_task"]) == ("1", "20", "1")
    # not overridden: the grouping of the cluster profile still applies
    text = dry_run_text(cfg, tmp_path, profiles=(PROFILE, CI_PROFILE))
    assert parse_dry_run(text).group_jobs["post"] == math.ceil(14 / 4)


def derived_runtime(cfg, runs):
    from forgetting.run.gpu_time import batch_runtime_min
    from forgetting.study.config import study_from_mapping

    return batch_runtime_min(study_from_mapping(cfg, source="test", root=ROOT), runs)


def test_full_study_needs_at_most_200_submissions(tmp_path):
    """From the plan and the profile: one job per agent batch, the post group's components
    merged by the profile's group-components, and the few single jobs."""
    text = dry_run_text(study_config(tmp_path), tmp_path)
    subs = submissions_of(text, ROOT)
    batches = 94  # 2 agents × (42 configurations × 100 runs + 5 × 100 baseline runs) / 100
    assert subs.per_rule["run_batch"] == batches  # a failed batch is retried and rerun alone
    assert subs.per_group == {"post": math.ceil(batches / SLURM["group-components"]["post"])}
    assert subs.grouped_jobs == {"post": 2 * batches}
    singles = {r: n for r, n in subs.per_rule.items() if r != "run_batch"}
    assert singles["build_gpu_image"] == 2 and singles["pull_swebench_images"] == 4  # vllm, trae-agent; 100 / 25
    assert singles["preflight_gpu"] == singles["preflight_cpu"] == 1  # one small job per partition
    assert subs.total == batches + math.ceil(batches / 4) + sum(singles.values())
    assert subs.total <= 200


#: a dry run's job list as Snakemake prints it: ungrouped jobs, a local rule, group jobs (their
#: members indented or not)
SYNTHETIC = (ROOT / "tests" / "data" / "dry_run_jobs.txt").read_text()


def test_parse_dry_run_counts_group_jobs_and_ungrouped_jobs():
    dry = parse_dry_run(SYNTHETIC)
    assert dict(dry.jobs) == {"run_batch": 1, "plan": 1, "analyze_batch": 1, "evaluate_batch": 3, "collect": 1,
                              "all": 1}
    assert dict(dry.ungrouped) == {"run_batch": 1, "plan": 1, "collect": 1, "all": 1}
    assert dict(dry.group_jobs) == {"post": 2}
    subs = submissions_of(SYNTHETIC, ROOT)
    # run_batch + collect + 2 post groups; plan (localrule) and all (no action) run locally
    assert subs.per_rule == {"run_batch": 1, "collect": 1} and subs.total == 4


@pytest.mark.parametrize(("text", "expected"), [
    ("rule a:\n    output: 'x'\n    shell: 'touch x'\n", set()),
    ("rule a:\n    output: 'x'\n    localrule: True\n    shell: 'touch x'\n", {"a"}),
    ("localrules: a, b\n\nrule a:\n    shell: 'x'\n\nrule b:\n    run:\n        pass\n", {"a", "b"}),
    ("rule all:\n    input: 'x'\n\nrule c:\n    localrule: config['x']\n    script: 's.py'\n", {"all"}),
])
def test_local_rules_from_rule_files(tmp_path, text, expected):
    path = tmp_path / "rules.smk"
    path.write_text(text)
    assert local_rules([path]) == expected


def test_the_workflows_local_rules():
    # target rules that only gather inputs, and the plan (seconds, no heavy work)
    assert local_rules(workflow_files(ROOT)) == {"all", "plan", "images", "analysis", "preflight"}


def test_a_dry_run_warns_of_placeholder_site_values_and_prints_no_empty_shell_commands(tmp_path):
    import subprocess

    from forgetting_testkit.checkout import cli_env
    from forgetting_testkit.dryrun import SITE_HOST_ARCH, snakemake_cmd

    cfg = small_study(tmp_path)
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(cfg))
    proc = subprocess.run(snakemake_cmd("-n", "--configfile", str(tmp_path / "study.yaml")), cwd=ROOT,
                          env=cli_env(SITE_HOST_ARCH), capture_output=True, text=True, timeout=300)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-2000:]
    for value in ("CHANGE-ME-cpu", "CHANGE-ME-gh200", "CHANGE-ME-account"):
        assert f"warning: the profile's site value '{value}' is still a placeholder" in log
    assert "rule run_batch:" in log and "Shell command: None" not in log


def test_the_evaluation_time_limit_covers_its_worst_case():
    """A batch's evaluation: every run at evaluation.timeout_s, evaluation.workers at a time."""
    study = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    worst_min = math.ceil(study["execution"]["batch_size"] * study["evaluation"]["timeout_s"]
                          / study["evaluation"]["workers"] / 60)
    assert worst_min == 750
    assert SLURM["set-resources"]["evaluate_batch"]["runtime"] >= worst_min


def test_the_readmes_dry_run_needs_no_conda(tmp_path):
    """README's `snakemake --profile profiles/slurm -n …` line, run as written on a machine
    without conda (no conda on PATH): it lists the study's jobs."""
    import os
    import shlex
    import shutil
    import subprocess

    from forgetting_testkit.checkout import bin_path, cli_env
    from forgetting_testkit.dryrun import SITE_HOST_ARCH

    (line,) = [ln.split("  #")[0] for ln in (ROOT / "README.md").read_text().splitlines()
               if ln.startswith("snakemake --profile profiles/slurm -n")]
    path = os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep)
                           if not (Path(d) / "conda").exists() and not (Path(d) / "mamba").exists())
    env = cli_env({**SITE_HOST_ARCH, "PATH": path})
    assert shutil.which("conda", path=path) is None
    proc = subprocess.run([bin_path("snakemake"), *shlex.split(line)[1:]], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-2000:]
    assert "run_batch" in proc.stdout
