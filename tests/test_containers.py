"""The cluster's Apptainer images: complete definition files, their builds, the chunked pull of
SWE-bench's instance images, and when these jobs enter the DAG.

The ``apptainer`` binary is not on these machines: builds and pulls run against its test
double (forgetting_testkit/fakes/apptainer.py), which checks the definition's ``%files`` sources and writes
placeholder images. What only a cluster can show is listed in docs/cluster.md.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml
from swebench.image_builder.image_spec import ImageSpec

from forgetting import agents
from forgetting.cluster.containers import (
    IMAGE_NAMES,
    ContainerSettings,
    build_command,
    build_image,
    definition_path,
    expand_path,
    pull_chunk,
    pull_chunks,
)
from forgetting.foundation.errors import ConfigError, ResourceError
from forgetting.instances.images import host_architecture
from forgetting.study.config import study_from_mapping
from forgetting_testkit import fakes
from forgetting_testkit.checkout import ROOT, bin_path, cli_env
from forgetting_testkit.dryrun import by_rule, dry_run, small_study, study_config

FAKE = fakes.APPTAINER
TRAE_COMMIT = "e839e559ac61bdd0e057c375dd1dee391fee797d"


def pin(requirement: str) -> str:
    """The version pinned for ``requirement`` in pyproject.toml's pipeline extra."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["pipeline"]
    for dep in deps:
        if dep.startswith(f"{requirement}=="):
            return dep.split("==")[1]
    raise AssertionError(f"{requirement} is not pinned in pyproject.toml")


def sections(text: str) -> dict[str, str]:
    out: dict[str, list[str]] = {}
    current = "header"
    for line in text.splitlines():
        if line.startswith("%"):
            current = line.split()[0]
            out[current] = []
        else:
            out.setdefault(current, []).append(line)
    return {k: "\n".join(v) for k, v in out.items()}


@pytest.mark.parametrize("name", IMAGE_NAMES)
def test_definition_files_are_complete(name):
    text = definition_path(name).read_text()
    parts = sections(text)
    header = parts["header"]
    assert re.search(r"^Bootstrap: docker$", header, re.MULTILINE)
    base = re.search(r"^From: (\S+)$", header, re.MULTILINE).group(1)
    assert ":" in base and not base.endswith(":latest"), base  # a fixed base tag
    for section in ("%labels", "%help", "%environment", "%post", "%test", "%runscript"):
        assert parts.get(section, "").strip(), f"{name}.def lacks {section}"
    assert "set -eu" in parts["%post"] and "set -eu" in parts["%test"]
    assert f"apptainer build --fakeroot images/containers/{name}.sif containers/{name}.def" in header
    # every %files source exists in the repository, whose root the build runs from
    for line in parts.get("%files", "").splitlines():
        if line.strip():
            assert (ROOT / line.split()[0]).exists(), line


def test_agent_and_evaluation_images_pin_what_the_package_pins():
    mini = definition_path("mini-swe-agent").read_text()
    assert f'"mini-swe-agent=={pin("mini-swe-agent")}"' in mini
    assert "uv venv --python 3.11" in mini and "sys.version_info[:2] == (3, 11)" in mini
    evaluation = definition_path("evaluation").read_text()
    assert f'"swebench=={pin("swebench")}"' in evaluation
    assert 'm.version("swebench") == "5.0.2"' in evaluation
    # both install this package editable, so it finds its config schema beside its source
    for text in (mini, evaluation):
        assert "workflow/schemas /opt/forgetting/workflow/schemas" in text and "-e /opt/forgetting" in text


INSTALL_TRAE = ROOT / "scripts" / "install-trae-agent.sh"


def test_trae_agent_is_its_git_repository_at_a_pinned_commit_on_python_3_12():
    text = definition_path("trae-agent").read_text()
    parts = sections(text)
    assert text.count(TRAE_COMMIT) >= 4  # label, help, checkout variable, %test
    # the image is made by the script a workstation installs it with (the opt-in test's route)
    assert "scripts/install-trae-agent.sh /opt/forgetting/install-trae-agent.sh" in parts["%files"]
    assert "bash /opt/forgetting/install-trae-agent.sh /opt/trae-agent" in parts["%post"]
    script = INSTALL_TRAE.read_text()
    assert re.search(r"^TRAE_COMMIT=(\w+)", script, re.MULTILINE).group(1) == TRAE_COMMIT == agents.TRAE_COMMIT
    assert "REPO=${TRAE_AGENT_REPO:-https://github.com/bytedance/trae-agent.git}" in script
    assert 'git -C "$PREFIX/src" checkout --quiet --detach "$TRAE_COMMIT"' in script
    assert "sys.version_info[:2] == (3, 12)" in parts["%test"] and "trae-cli --help" in parts["%test"]


def test_trae_agent_image_installs_what_trae_cli_imports_at_startup():
    """trae-cli imports ``docker`` and ``pexpect`` at startup (trae_agent.agent.base_agent ->
    docker_manager), which only trae-agent's ``evaluation`` extra installs: without it,
    ``trae-cli --help`` — the image's %test — fails with ModuleNotFoundError."""
    script = INSTALL_TRAE.read_text()
    sync = [line for line in script.splitlines() if " sync " in line]
    assert len(sync) == 1
    assert "--frozen --no-dev --no-editable --extra evaluation" in sync[0]  # the commit's own lock file
    test = sections(definition_path("trae-agent").read_text())["%test"]
    assert "python -c 'import docker, pexpect'" in test and "trae-cli run --help" in test
    subprocess.run(["bash", "-n", str(INSTALL_TRAE)], check=True)


def test_trae_agent_install_refuses_a_prefix_that_holds_one(tmp_path):
    (tmp_path / "venv").mkdir()
    done = subprocess.run(["bash", str(INSTALL_TRAE), str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.startswith(f"error: {tmp_path} already holds an install")
    done = subprocess.run(["bash", str(INSTALL_TRAE)], capture_output=True, text=True)
    assert done.returncode != 0 and "usage: scripts/install-trae-agent.sh PREFIX" in done.stderr


def test_vllm_image_pins_vllm_and_says_how_gh200_is_served():
    text = definition_path("vllm").read_text()
    version = re.search(r'"vllm==([0-9.]+)"', text).group(1)
    assert f"vllm.version {version}" in text and f'm.version("vllm") == "{version}"' in text
    assert re.search(r"^From: nvidia/cuda:[0-9.]+-devel-ubuntu24\.04$", text, re.MULTILINE)
    assert "aarch64" in text and "GH200" in text


def test_build_command_exactly():
    s = ContainerSettings.from_section({"image_dir": "img", "executable": "apptainer"})
    assert build_command("containers/vllm.def", "img/vllm.sif", s) == [
        "apptainer", "build", "--fakeroot", "img/vllm.sif", "containers/vllm.def"]


@pytest.fixture
def fake_apptainer(tmp_path, monkeypatch):
    exe = fakes.install(FAKE, tmp_path / "bin" / "apptainer")
    calls = tmp_path / "calls.jsonl"
    monkeypatch.setenv("FAKE_APPTAINER_CALLS", str(calls))
    return exe, calls


calls_of = fakes.apptainer_calls


def test_build_image_renames_a_finished_build_into_place(fake_apptainer, tmp_path):
    exe, calls = fake_apptainer
    settings = ContainerSettings.from_section({"image_dir": str(tmp_path / "img"), "executable": str(exe)})
    target = tmp_path / "img" / "mini-swe-agent.sif"
    log = tmp_path / "logs" / "build.log"
    assert build_image(definition_path("mini-swe-agent"), target, settings, log=log) == target
    assert definition_path("mini-swe-agent").read_bytes() in target.read_bytes()  # the SIF's definition file
    (call,) = calls_of(calls)
    assert call[:2] == ["build", "--fakeroot"] and call[-1] == str(definition_path("mini-swe-agent"))
    assert Path(call[-2]).name.startswith(".mini-swe-agent.sif.")  # built under a temporary name
    assert log.read_text().startswith("$ ") and sorted(p.name for p in target.parent.iterdir()) == [target.name]


def test_a_failed_build_leaves_nothing_and_names_its_log(fake_apptainer, tmp_path, monkeypatch):
    exe, _ = fake_apptainer
    monkeypatch.setenv("FAKE_APPTAINER_FAIL_BUILD", "1")
    settings = ContainerSettings.from_section({"image_dir": str(tmp_path / "img"), "executable": str(exe)})
    target = tmp_path / "img" / "vllm.sif"
    with pytest.raises(ResourceError, match=r"apptainer build .*vllm.def failed \(exit 255\); see .*build.log"):
        build_image(definition_path("vllm"), target, settings, log=tmp_path / "build.log")
    assert list(target.parent.iterdir()) == []
    assert "build failed (test double)" in (tmp_path / "build.log").read_text()
    missing = ContainerSettings.from_section(
        {"image_dir": str(tmp_path / "img"), "executable": str(tmp_path / "no-apptainer")}
    )
    with pytest.raises(ResourceError, match=r"containers\.executable: .*not found"):
        build_image(definition_path("vllm"), target, missing, log=tmp_path / "b2.log")


def study_of(cfg):
    return study_from_mapping(cfg, source="test", root=ROOT)


def test_pull_chunks_cover_the_tasks_in_stable_named_chunks(tmp_path):
    cfg = study_config(tmp_path)
    chunks = pull_chunks(study_of(cfg))
    tasks = study_of(cfg).tasks
    assert [len(c.ids) for c in chunks] == [25, 25, 25, 25]
    assert [i for c in chunks for i in c.ids] == sorted(tasks)
    assert all(re.fullmatch(r"c\d{3}-[0-9a-f]{8}", c.name) for c in chunks)
    assert pull_chunks(study_of(cfg)) == chunks  # deterministic
    one = pull_chunks(study_of({**cfg, "only_tasks": tasks[3]}))
    assert [c.ids for c in one] == [(tasks[3],)] and one[0].name not in {c.name for c in chunks}


def test_pull_chunk_pulls_each_image_once_and_writes_its_marker(fake_apptainer, tmp_path):
    exe, calls = fake_apptainer
    cfg = small_study(tmp_path)
    ids = cfg["tasks"]["ids"]
    instances = tmp_path / "instances.jsonl"
    instances.write_text("".join(json.dumps({"instance_id": i}) + "\n" for i in ids))
    cfg["dataset"]["instances"] = str(instances)
    cfg["evaluation"] = {"backend": "apptainer", "image_dir": str(tmp_path / "sif"),
                         "apptainer": {"executable": str(exe)}}
    cfg["containers"] = {"pull_chunk_size": 2}
    study = study_of(cfg)
    first, second = pull_chunks(study)
    marker = tmp_path / "sif" / ".pulled" / f"{first.name}.json"
    record = pull_chunk(study, first.name, marker, log=tmp_path / "pull.log")
    assert json.loads(marker.read_text()) == record
    assert sorted(record["images"]) == sorted(first.ids)
    for i in first.ids:
        assert record["images"][i]["sif"] == str(tmp_path / "sif" / f"{i}.sif")
        assert Path(record["images"][i]["sif"]).is_file()
    arch = {"x86_64": "amd64", "arm64": "arm64"}[host_architecture()]
    assert [c[-1] for c in calls_of(calls)] == [
        "docker://" + ImageSpec(instance_id=i, dockerfile="-", namespace="swebench", arch=arch).name for i in first.ids]
    assert all(c[1:3] == ["--arch", arch] for c in calls_of(calls))  # the host's architecture, by default
    pull_chunk(study, first.name, marker)  # images already there: nothing pulled again
    assert len(calls_of(calls)) == len(first.ids)
    assert len((tmp_path / "pull.log").read_text().splitlines()) == len(first.ids)
    with pytest.raises(ConfigError, match="pull chunk 'c009-00000000' is not part"):
        pull_chunk(study, "c009-00000000", marker)
    assert second.ids == (sorted(ids)[2],)


def test_an_unset_variable_in_an_image_path_is_one_line_before_any_job(tmp_path, monkeypatch):
    monkeypatch.delenv("FORGETTING_NO_SUCH_DIR", raising=False)
    with pytest.raises(ConfigError, match=r"containers.image_dir: .*\$FORGETTING_NO_SUCH_DIR"):
        expand_path("$FORGETTING_NO_SUCH_DIR/img", "containers.image_dir")
    monkeypatch.setenv("FORGETTING_SOME_DIR", "/scratch/x")
    assert expand_path("$FORGETTING_SOME_DIR/img", "k") == "/scratch/x/img"
    cfg = study_config(tmp_path, containers={"image_dir": "$FORGETTING_NO_SUCH_DIR/img"})
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    proc = subprocess.run([bin_path("snakemake"), "-n", "-c1", "--configfile", str(path)], cwd=ROOT,
                          env=cli_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "error: " in proc.stderr and "$FORGETTING_NO_SUCH_DIR, which is not set" in proc.stderr


def builds_of(jobs):
    return by_rule(jobs, "build_gpu_image") + by_rule(jobs, "build_cpu_image")


def test_the_full_study_builds_its_images_and_pulls_swebench_in_chunks(tmp_path):
    jobs = dry_run(study_config(tmp_path), tmp_path)
    # both images hold code for the GPU nodes: built by the rule the profile sends to the GPU partition
    builds = {j.output[0] for j in by_rule(jobs, "build_gpu_image")}
    assert builds == {"images/containers/vllm.sif", "images/containers/trae-agent.sif"}
    assert not by_rule(jobs, "build_cpu_image")
    pulls = by_rule(jobs, "pull_swebench_images")
    assert len(pulls) == 4
    markers = {j.output[0] for j in pulls}
    (gpu_check,) = [j.output[0] for j in by_rule(jobs, "preflight_gpu")]
    (cpu_check,) = [j.output[0] for j in by_rule(jobs, "preflight_cpu")]
    # the gold patches, checked in the instance images after the CPU preflight, before any batch
    (gold,) = by_rule(jobs, "preflight_gold")
    assert set(gold.input) == markers | {cpu_check} and gold.output[0].startswith(f"{Path(cpu_check).parent}/gold-")
    for job in by_rule(jobs, "run_batch"):
        expected = {"images/containers/vllm.sif", *markers, gpu_check, gold.output[0]}
        if job.wildcards["agent"] == "trae":
            expected.add("images/containers/trae-agent.sif")
        assert set(job.input) == expected, job
    evaluations = by_rule(jobs, "evaluate_batch")
    assert all(set(j.input) == markers | {j.input[0], cpu_check, gold.output[0]} for j in evaluations)


def test_image_jobs_enter_only_where_the_config_asks_for_apptainer(tmp_path):
    # the demo's shape: scripted model, no apptainer evaluation -> no image job at all
    jobs = dry_run(small_study(tmp_path), tmp_path)
    assert not builds_of(jobs) and not by_rule(jobs, "pull_swebench_images")
    assert all(j.input == () or j.input == ("",) for j in by_rule(jobs, "run_batch"))
    # apptainer evaluation alone: the instance images for the evaluation jobs, nothing else
    cfg = small_study(tmp_path)
    cfg["evaluation"] = {"backend": "apptainer"}
    jobs = dry_run(cfg, tmp_path)
    assert not builds_of(jobs)
    (pull,) = by_rule(jobs, "pull_swebench_images")
    assert all(pull.output[0] in j.input for j in by_rule(jobs, "evaluate_batch"))
    assert not any(pull.output[0] in j.input for j in by_rule(jobs, "run_batch"))


def test_newer_images_never_rerun_finished_batches(tmp_path):
    """Image inputs are ancient: rebuilding vllm.sif or re-pulling a chunk after batches
    finished leaves the batches finished."""
    cfg = study_config(tmp_path)
    results = Path(cfg["study"]["results_dir"])
    jobs = dry_run(cfg, tmp_path)
    old = 1_700_000_000
    for job in jobs:
        if job.rule in ("run_batch", "evaluate_batch", "analyze_batch"):
            for out in job.output:
                Path(out).parent.mkdir(parents=True, exist_ok=True)
                Path(out).write_text("{}")
                os.utime(out, (old + 10, old + 10))
    images = tmp_path / "images"
    cfg["containers"] = {"image_dir": str(images / "containers")}
    cfg["model"]["vllm"]["apptainer_image"] = str(images / "containers" / "vllm.sif")
    cfg["agent"]["trae"]["apptainer_image"] = str(images / "containers" / "trae-agent.sif")
    cfg["evaluation"]["image_dir"] = str(images / "swebench")
    for job in jobs:  # every image and pull marker, newer than every batch output
        for path in job.input:
            if path.startswith("images/"):
                p = images / path.removeprefix("images/")
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text("x")
    assert results.is_dir() and (images / "containers" / "vllm.sif").is_file()
    jobs = dry_run(cfg, tmp_path, "--until", "analyze_batch")
    # a preflight not run yet (or of changed settings) is run, and reruns no finished batch either
    assert not [j for j in jobs if j.rule not in ("collect", "all", "plan", "preflight_gpu", "preflight_cpu")], \
        [j.rule for j in jobs][:5]


@pytest.mark.skipif(not (ROOT / "resources" / "demo" / "tasks.txt").is_file(),
                    reason="the demo tasks (resources/demo/tasks.txt, issue 4) are not in this checkout")
def test_the_demo_dag_has_no_image_job(tmp_path):
    demo = yaml.safe_load((ROOT / "config" / "demo.yaml").read_text())
    demo["study"]["results_dir"] = str(tmp_path / "results")
    jobs = dry_run(demo, tmp_path)
    assert by_rule(jobs, "run_batch")
    assert not builds_of(jobs) and not by_rule(jobs, "pull_swebench_images")
