"""Dry-runs of the real workflow with the cluster profile, read back as job lists.

``dry_run(config, ...)`` writes ``config`` (a study mapping) to a file, runs
``snakemake -n --profile profiles/slurm --configfile FILE`` from the repository root and
returns the jobs it lists: rule, wildcards and outputs. Nothing is submitted. Without conda
on the machine the conda deployment is swapped for ``apptainer``, which deploys nothing for
this workflow (no rule declares a container), so the DAG is the same.
"""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from forgetting_testkit.checkout import ROOT, bin_path, cli_env

PROFILE = ROOT / "profiles" / "slurm"
CI_PROFILE = ROOT / "profiles" / "slurm-ci"
_BLOCK = re.compile(r"^(?P<indent>[ \t]*)(?:local)?rule (?P<rule>\w+):\s*$")


@dataclass(frozen=True)
class Job:
    rule: str
    wildcards: dict[str, str]
    input: tuple[str, ...]
    output: tuple[str, ...]
    resources: dict[str, str]

    @property
    def batch_key(self) -> str:
        w = self.wildcards
        return f"{w['agent']}/{w['configuration']}/{w['batch']}"


def study_config(tmp_path: Path, **changes: Any) -> dict[str, Any]:
    """config/config.yaml with its results under ``tmp_path`` and top-level ``changes``."""
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cfg["study"]["results_dir"] = str(tmp_path / "results")
    for key, value in changes.items():
        cfg[key] = copy.deepcopy(value)
    return cfg


def small_study(tmp_path: Path) -> dict[str, Any]:
    """Two agents × (two configurations + baseline) × three tasks, batches of two runs, with
    the scripted model and docker evaluation (no image jobs): 14 batches."""
    tasks = [t for t in (ROOT / "resources/tasks/swe-bench-verified-100.txt").read_text().split() if "__" in t][:3]
    cfg = study_config(tmp_path)
    cfg["tasks"] = {"ids": tasks}
    cfg["repeats"] = {"baseline": 2, "deletion": 1}
    cfg["configurations"] = {"names": ["delayed-turn-tool_output-50", "immediate-turn-both-100"]}
    cfg["model"] = {"backend": "scripted", "name": "scripted-careful-agent", "served_name": "scripted"}
    cfg["agent"] = {"turn_cap": 60}
    cfg["execution"] = {"batch_size": 2, "concurrency": 2}
    cfg["evaluation"] = {"backend": "docker"}
    cfg.pop("containers", None)
    cfg.pop("cluster", None)  # no cluster route: the scripted model, docker evaluation
    return cfg


def snakemake_cmd(*args: str, profiles: tuple[Path, ...] = (PROFILE,)) -> list[str]:
    cmd = [bin_path("snakemake")]
    for i, p in enumerate(profiles):
        cmd += ["--profile" if i == 0 else "--workflow-profile", str(p)]
    if shutil.which("conda") is None:
        cmd += ["--software-deployment-method", "apptainer"]
    return [*cmd, *args]


#: the machine Snakemake runs on, for the shipped profile's site (GH200 nodes, arm64 login
#: nodes): the workflow checks each partition's architecture against it (forgetting.cluster.route)
SITE_HOST_ARCH = {"FORGETTING_HOST_ARCH": "arm64"}


def dry_run_text(config: dict[str, Any], tmp_path: Path, *args: str,
                 profiles: tuple[Path, ...] = (PROFILE,)) -> str:
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = subprocess.run(
        snakemake_cmd("-n", "--configfile", str(path), *args, profiles=profiles),
        cwd=ROOT, env=cli_env(SITE_HOST_ARCH), capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    return proc.stdout


def parse_jobs(text: str) -> list[Job]:
    jobs: list[Job] = []
    current: dict[str, Any] | None = None

    def close() -> None:
        if current is not None:
            jobs.append(Job(current["rule"], current["wildcards"], tuple(current["input"]), tuple(current["output"]),
                            current["resources"]))

    for line in text.splitlines():
        m = _BLOCK.match(line)
        if m:
            close()
            current = {"rule": m.group("rule"), "wildcards": {}, "input": [], "output": [], "resources": {}}
            continue
        if current is None:
            continue
        stripped = line.strip()
        key, _, value = stripped.partition(": ")
        if key == "wildcards":
            current["wildcards"] = dict(kv.split("=", 1) for kv in value.split(", "))
        elif key in ("input", "output"):
            current[key] = value.split(", ")
        elif key == "resources":
            current["resources"] = dict(kv.split("=", 1) for kv in value.split(", ") if "=" in kv)
    close()
    return jobs


def dry_run(config: dict[str, Any], tmp_path: Path, *args: str,
            profiles: tuple[Path, ...] = (PROFILE,)) -> list[Job]:
    return parse_jobs(dry_run_text(config, tmp_path, *args, profiles=profiles))


def by_rule(jobs: list[Job], rule: str) -> list[Job]:
    return [j for j in jobs if j.rule == rule]
