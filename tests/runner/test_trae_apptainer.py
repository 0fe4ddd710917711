"""Trae's launch inside the instance image, run through the apptainer test double, which
mounts image binds as Apptainer's source does (forgetting_testkit/fakes/apptainer_exec.py:
``id=`` names a partition by descriptor ID; without it, the first *data* partition, which an
image from ``apptainer build`` lacks)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from forgetting.foundation.errors import ConfigError
from forgetting.run import trae
from forgetting.run.context import RunContext
from forgetting.run.workspace import Workspace
from forgetting.study.plan import plan_runs
from forgetting_testkit import fakes
from forgetting_testkit.fakes.apptainer_exec import can_mount, host_arch
from forgetting_testkit.runner import runner_settings, study_at
from forgetting_testkit.sif import sif_bytes, tree_payload, write_sif
from forgetting_testkit.trajectories import trae_trajectory

TRAE_CLI = "#!/bin/sh\necho \"TRAE-STARTED $*\"\n"


def _ctx_of(tmp_path: Path, trae_image: Path, apptainer: dict | None = None) -> RunContext:
    exe = fakes.install(fakes.APPTAINER, tmp_path / "bin" / "apptainer")
    instance = write_sif(tmp_path / "img" / "task.sif", host_arch(), definition="Bootstrap: docker\n",
                         payload=tree_payload({}))
    settings = runner_settings(evaluation={"apptainer": {"executable": str(exe), **(apptainer or {})}},
                               agent={"trae": {"apptainer_image": str(trae_image)}})
    run = next(r for r in plan_runs(study_at(tmp_path, agents=["trae"])) if r.repeat == 1)
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    return RunContext(run, settings, out, tmp_path / "scratch", Workspace(run.task, image=instance), "fix it",
                      "http://127.0.0.1:4100/v1")


def _launch(tmp_path: Path, trae_image: Path, apptainer: dict | None = None) -> tuple[list[str], dict[str, str]]:
    ctx = _ctx_of(tmp_path, trae_image, apptainer)
    testbed = tmp_path / "testbed"
    testbed.mkdir(exist_ok=True)
    return trae.command(ctx), {**os.environ, "FAKE_TESTBED": str(testbed)}


def _built_trae_image(tmp_path: Path) -> Path:
    """The Trae image as `apptainer build` writes it: definition, JSON objects, then its root file
    system (the only partition, a primary system partition), holding /opt/trae-agent."""
    return write_sif(tmp_path / "img" / "trae-agent.sif", host_arch(), definition="Bootstrap: docker\n",
                     payload=tree_payload({"/opt/trae-agent/bin/trae-cli*": TRAE_CLI}))


def test_trae_cli_starts_from_the_prefix_bound_out_of_the_built_image(tmp_path):
    cmd, env = _launch(tmp_path, _built_trae_image(tmp_path))
    bind = cmd[cmd.index("--bind", cmd.index("--bind") + 1) + 1]
    assert bind.endswith(":/opt/trae-agent:id=4,image-src=/opt/trae-agent")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("TRAE-STARTED run --file ") and "--must-patch" in proc.stdout


def test_the_bind_without_id_finds_no_data_partition_in_a_built_image(tmp_path):
    """The form of 8c875c1 (``image-src`` alone): Apptainer takes the image's first data
    partition, and a built image has none — the exec stops before the agent, exit 255."""
    image = _built_trae_image(tmp_path)
    cmd, env = _launch(tmp_path, image)
    old = [a.replace(":id=4,image-src=", ":image-src=") for a in cmd]
    proc = subprocess.run(old, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 255 and "TRAE-STARTED" not in proc.stdout
    assert f"no data partition found in {image}" in proc.stderr


def test_an_image_without_a_root_file_system_is_one_line_before_any_run(tmp_path):
    image = tmp_path / "img" / "data-only.sif"
    image.parent.mkdir(parents=True)
    image.write_bytes(sif_bytes(host_arch(), partition=False, data=(tree_payload({}),)))
    settings = runner_settings(dataset={"kind": "swebench"}, agent={"trae": {"apptainer_image": str(image)}})
    with pytest.raises(ConfigError, match=r"agent\.trae\.apptainer_image: .*data-only\.sif has no root file system"):
        trae.check_ready(settings)
    (tmp_path / "img" / "junk.sif").write_text("not an image")
    settings = runner_settings(dataset={"kind": "swebench"},
                               agent={"trae": {"apptainer_image": str(tmp_path / "img" / "junk.sif")}})
    with pytest.raises(ConfigError, match=r"agent\.trae\.apptainer_image: .*junk\.sif: not a SIF image"):
        trae.check_ready(settings)


def test_mini_swe_agent_keeps_tmp_between_its_steps(tmp_path, monkeypatch):
    """mini-swe-agent starts a fresh ``apptainer exec --contain`` per step; Apptainer gives each
    its own /tmp unless ``--workdir`` names where /tmp lives (the double follows addTmpMount).
    The run's options keep it on scratch for the whole run; mini's own defaults lose it."""
    from minisweagent.environments.singularity import SingularityEnvironment

    from forgetting.run.mini import mini_exec_args

    exe = fakes.install(fakes.APPTAINER, tmp_path / "bin" / "apptainer")
    image = write_sif(tmp_path / "img" / "task.sif", host_arch(), definition="Bootstrap: docker\n",
                      payload=tree_payload({}))
    testbed = tmp_path / "testbed"
    testbed.mkdir()
    monkeypatch.setenv("FAKE_TESTBED", str(testbed))
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    settings = runner_settings(evaluation={"apptainer": {"executable": str(exe)}})
    args = mini_exec_args(settings, tmp_path / "scratch")
    assert args == ["--contain", "--cleanenv", "--fakeroot", "--no-home", "--workdir",
                    str(tmp_path / "scratch" / "apptainer-work")]
    for exec_args, kept in [(args, True), (["--contain", "--cleanenv", "--fakeroot"], False)]:
        env = SingularityEnvironment(image=str(image), cwd="/testbed", executable=str(exe), exec_args=exec_args)
        try:
            assert env.execute({"command": "echo step-one > /tmp/note"})["returncode"] == 0
            second = env.execute({"command": "cat /tmp/note"})
            assert (second["returncode"] == 0 and "step-one" in second["output"]) is kept, second
        finally:
            env.cleanup()


ACTIVATES = "export ACTIVATED=testbed\n"  # the instance image's /root/.bashrc, as SWE-bench writes it


def test_both_agents_bash_sees_the_images_conda_activation(tmp_path, monkeypatch):
    """BASH_ENV=/root/.bashrc (Trae's command; mini's SWE-bench config) activates the image's
    environment only if the image's /root is visible: under --contain --fakeroot Apptainer mounts
    a fresh empty home at /root (container_linux.go: getHomePaths, addHomeStagingDir), so both
    agents' commands need --no-home. Main's commands gave an empty ACTIVATED."""
    from minisweagent.environments.singularity import SingularityEnvironment

    from forgetting.run.mini import mini_exec_args

    root = tmp_path / "image-root"
    (root / "root").mkdir(parents=True)
    (root / "root" / ".bashrc").write_text(ACTIVATES)
    monkeypatch.setenv("FAKE_APPTAINER_ROOT", str(root))
    cli = '#!/bin/sh\nbash -c \'echo "TRAE [$ACTIVATED]"\'\n'
    image = write_sif(tmp_path / "img" / "trae-agent.sif", host_arch(), definition="Bootstrap: docker\n",
                      payload=tree_payload({"/opt/trae-agent/bin/trae-cli*": cli}))
    cmd, env = _launch(tmp_path, image)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert (proc.returncode, proc.stdout) == (0, "TRAE [testbed]\n"), proc.stderr
    without = [a for a in cmd if a != "--no-home"]
    proc = subprocess.run(without, capture_output=True, text=True, env=env, timeout=120)
    assert proc.stdout == "TRAE []\n", proc.stderr

    # mini: its own sandbox of the image (whose /root holds the .bashrc), one exec per step
    monkeypatch.setenv("FAKE_TESTBED", env["FAKE_TESTBED"])
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    exe = Path(cmd[0])
    settings = runner_settings(evaluation={"apptainer": {"executable": str(exe)}})
    args = mini_exec_args(settings, tmp_path / "scratch")
    for exec_args, seen in [(args, "[testbed]"), ([a for a in args if a != "--no-home"], "[]")]:
        mini = SingularityEnvironment(image=str(image), cwd="/testbed", executable=str(exe), exec_args=exec_args,
                                      env={"BASH_ENV": "/root/.bashrc"})
        (Path(mini.sandbox_dir) / "root").mkdir(exist_ok=True)
        (Path(mini.sandbox_dir) / "root" / ".bashrc").write_text(ACTIVATES)
        try:
            out = mini.execute({"command": 'echo "[$ACTIVATED]"'})
        finally:
            mini.cleanup()
        assert out["returncode"] == 0 and out["output"].strip() == seen, out


AGENT = """#!/bin/sh
while [ $# -gt 0 ]; do case "$1" in --trajectory-file) out="$2"; shift;; esac; shift; done
dd if=/dev/zero of=/testbed/build.bin bs=1M count=100 2>&1 || exit 3
cp /opt/trae-agent/trajectory.json "$out"
"""


@pytest.mark.skipif(not can_mount(), reason="the double limits the writable layer only as root (as in CI)")
def test_a_trae_run_has_its_own_writable_layer_beyond_apptainers_64_mib(tmp_path, capfd):
    """run_trae makes the run's overlay image on scratch, starts the agent with it (here one
    that writes 100 MiB under /testbed, more than --writable-tmpfs's session holds) and removes
    it afterwards; with ``writable_layer_mib: 0`` (8c875c1's layer) the same agent runs out of space."""
    image = write_sif(tmp_path / "img" / "trae-agent.sif", host_arch(), definition="Bootstrap: docker\n",
                      payload=tree_payload({"/opt/trae-agent/bin/trae-cli*": AGENT,
                                            "/opt/trae-agent/trajectory.json": json.dumps(trae_trajectory())}))
    for mib, status in [(8192, "submitted"), (0, "error")]:
        _, env = _launch(tmp_path / str(mib), image, {"writable_layer_mib": mib,
                                                       "scratch_dir": str(tmp_path / "scratch")})
        ctx = _ctx_of(tmp_path / str(mib), image, {"writable_layer_mib": mib, "scratch_dir": str(tmp_path / "scratch")})
        os.environ["FAKE_TESTBED"] = env["FAKE_TESTBED"]
        try:
            outcome = trae.run_trae(ctx)
        finally:
            del os.environ["FAKE_TESTBED"]
        assert outcome.status == status, capfd.readouterr()
        assert list((tmp_path / "scratch" / "apptainer" / "layers").iterdir()) == []
    assert "No space left on device" in capfd.readouterr().out
