"""The apptainer backend. The binary is not on these machines: the exact commands are
asserted, run.sh runs for real under bash, and the backend as a whole runs against a test
double of the binary (forgetting_testkit/fakes/apptainer.py) that executes the container's command on the
host. Running the real ``apptainer exec`` in a SWE-bench image is left to the cluster."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from swebench.harness.constants import END_TEST_OUTPUT, START_TEST_OUTPUT
from swebench.image_builder.image_spec import ImageSpec

from forgetting.evaluate.apptainer import (
    ApptainerBackend,
    exec_command,
    image_uri,
    pull_command,
    pull_image,
)
from forgetting.evaluate.evaluate import evaluate_patch
from forgetting.evaluate.grading import spec_for, verdict_from_log
from forgetting.evaluate.scripts import apply_and_eval_script
from forgetting.foundation.errors import ResourceError, UserError
from forgetting.instances.images import InstanceImages
from forgetting.study.evaluation import ApptainerSettings, EvalSettings
from forgetting_testkit import evaltask, fakes
from forgetting_testkit.fakes.apptainer_exec import can_mount as fakes_can_mount
from forgetting_testkit.sif import write_sif

FAKE = fakes.APPTAINER


X86 = InstanceImages.from_section({"architecture": "x86_64"})
ARM = InstanceImages.from_section({"architecture": "arm64", "namespace": "ghcr.io/site"})


@pytest.mark.parametrize(("images", "arch", "namespace"), [(X86, "amd64", "swebench"), (ARM, "arm64", "ghcr.io/site")])
def test_image_names_follow_the_harness(images, arch, namespace):
    # the same name swebench's own ImageSpec gives a registry image of that architecture
    spec = ImageSpec(instance_id="django__django-11099", dockerfile="FROM scratch", namespace=namespace, arch=arch)
    assert images.name("django__django-11099") == spec.name
    assert image_uri({"instance_id": "django__django-11099"}, images) == f"docker://{spec.name}"
    # a swebench 5.x row's own image (the published x86_64 one) does not decide
    assert image_uri({"instance_id": "a__b-1", "image": "ghcr.io/x/y:2"}, images) == images.uri("a__b-1")


def test_pull_command_exactly():
    settings = ApptainerSettings.from_section({"pull_args": ["--disable-cache"]})
    cmd = pull_command({"instance_id": "django__django-11099"}, Path("/sif/django__django-11099.sif"), settings, ARM)
    assert cmd == [
        "apptainer",
        "pull",
        "--arch",
        "arm64",
        "--disable-cache",
        "/sif/django__django-11099.sif",
        "docker://ghcr.io/site/sweb.eval.arm64.django_1776_django-11099:latest",
    ]


def test_exec_command_exactly():
    cmd = exec_command(
        Path("/sif/django__django-11099.sif"), Path("/res/runs/mini/baseline/t/1/eval"),
        ApptainerSettings.from_section(), ["--overlay", "/s/l/overlay.img", "--workdir", "/s/l/work"],
    )
    assert cmd == [
        "apptainer",
        "exec",
        "--contain",
        "--cleanenv",
        "--fakeroot",
        "--overlay", "/s/l/overlay.img", "--workdir", "/s/l/work",
        "--pwd",
        "/testbed",
        "--bind",
        "/res/runs/mini/baseline/t/1/eval:/forgetting",
        "/sif/django__django-11099.sif",
        "/bin/bash",
        "/forgetting/run.sh",
    ]
    with pytest.raises(UserError, match="bind path cannot contain"):
        exec_command(Path("/sif/x.sif"), Path("/res/a:b/eval"), ApptainerSettings.from_section())


CLUSTER_SIF = os.environ.get("FORGETTING_APPTAINER_SIF")  # a pulled SWE-bench image: DIR/<instance_id>.sif
CLUSTER_ROW = os.environ.get("FORGETTING_APPTAINER_ROW")  # that instance's dataset row (a JSON file)


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("apptainer") is None or not (CLUSTER_SIF and CLUSTER_ROW),
    reason="the real `apptainer exec` needs the apptainer binary and a SWE-bench SIF image, which these "
    "machines lack; on the cluster set FORGETTING_APPTAINER_SIF and FORGETTING_APPTAINER_ROW",
)
def test_gold_patch_in_a_real_swebench_image(tmp_path):
    row = json.loads(Path(CLUSTER_ROW).read_text())
    settings = EvalSettings.from_section({"backend": "apptainer", "image_dir": str(Path(CLUSTER_SIF).parent)})
    backend = ApptainerBackend(settings)
    backend.check({row["instance_id"]: row})
    report = evaluate_patch(row, row["patch"], backend, out_dir=tmp_path)
    assert report.status == "resolved", (tmp_path / "eval" / "test_output.txt").read_text()[-3000:]


def test_missing_binary_and_classic_rows_are_one_line_errors(tmp_path):
    backend = ApptainerBackend(EvalSettings.from_section({"apptainer": {"executable": str(tmp_path / "nope")}}))
    with pytest.raises(UserError, match=r"nope.* not found on PATH \(evaluation.apptainer.executable\)"):
        backend.check({})
    backend = ApptainerBackend(EvalSettings.from_section({"apptainer": {"executable": sys.executable}}))
    classic = {"instance_id": "a__b-1", "FAIL_TO_PASS": "[]", "PASS_TO_PASS": "[]"}
    with pytest.raises(
        ResourceError, match=r"instance a__b-1: its dataset row lacks eval_script, log_parser, eval_type"
    ):
        backend.check({"a__b-1": classic})


def run_sh(tmp_path: Path, patch: str) -> subprocess.CompletedProcess[str]:
    testbed = tmp_path / "testbed"
    evaltask.build_repo(testbed)
    (tmp_path / "patch.diff").write_text(patch)
    (tmp_path / "eval.sh").write_text("echo EVAL-SCRIPT-RAN\ngit diff --stat\n")
    script = apply_and_eval_script(
        testbed=str(testbed), patch_file=str(tmp_path / "patch.diff"), eval_script=str(tmp_path / "eval.sh")
    )
    (tmp_path / "run.sh").write_text(script)
    return subprocess.run(["bash", str(tmp_path / "run.sh")], capture_output=True, text=True, timeout=60)


def test_run_sh_applies_the_patch_then_runs_the_eval_script(tmp_path):
    proc = run_sh(tmp_path, evaltask.patch("gold"))
    assert proc.returncode == 0
    assert ">>>>> Applied Patch (git apply --verbose)" in proc.stdout
    assert "EVAL-SCRIPT-RAN" in proc.stdout and "calc.py | 2 +-" in proc.stdout


def test_run_sh_reports_a_patch_that_does_not_apply(tmp_path):
    proc = run_sh(tmp_path, evaltask.patch("stale"))
    assert proc.returncode == 97
    assert proc.stdout.strip().endswith(">>>>> Patch Apply Failed") and "EVAL-SCRIPT-RAN" not in proc.stdout
    # every command of the harness's GIT_APPLY_CMDS was tried, ending with patch(1)
    assert "saving rejects to file calc.py.rej" in proc.stdout


@pytest.fixture(scope="module")
def row(tmp_path_factory):
    return evaltask.swebench_row(tmp_path_factory.mktemp("row"))


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """Settings whose apptainer is the test double; returns (settings, calls file)."""
    exe = fakes.install(FAKE, tmp_path / "bin" / "apptainer")
    calls = tmp_path / "calls.jsonl"
    testbed = tmp_path / "testbed"
    evaltask.build_repo(testbed)
    monkeypatch.setenv("FAKE_APPTAINER_CALLS", str(calls))
    monkeypatch.setenv("FAKE_TESTBED", str(testbed))
    settings = EvalSettings.from_section({
        "backend": "apptainer", "timeout_s": 60, "image_dir": str(tmp_path / "sif"),
        "apptainer": {"executable": str(exe), "scratch_dir": str(tmp_path / "scratch")},
    })
    return settings, calls


calls_of = fakes.apptainer_calls


def test_backend_pulls_once_runs_the_rows_eval_script_and_grades(row, fake, tmp_path):
    settings, calls = fake
    backend = ApptainerBackend(settings)
    backend.check({row["instance_id"]: row})
    out = tmp_path / "run"
    report = evaluate_patch(
        row, evaltask.patch("gold"), backend, out_dir=out, run_id="mini/baseline/demo__calc-1/1"
    )
    assert report.status == "resolved", (tmp_path / "run" / "eval" / "test_output.txt").read_text()
    assert report.tests["FAIL_TO_PASS"]["failure"] == [] and len(report.tests["FAIL_TO_PASS"]["success"]) == 2
    sif = settings.image_dir / "demo__calc-1.sif"
    pull, create, run = calls_of(calls)
    partial = Path(pull[-2])  # pulled to a temporary name, then renamed into place
    assert partial.parent == sif.parent and partial.name.startswith(".demo__calc-1.sif.")
    assert pull == pull_command(row, partial, settings.apptainer, settings.images)[1:] and sif.is_file()
    assert pull[-1] == settings.images.uri("demo__calc-1")
    # its own writable layer on scratch: an 8 GiB sparse overlay image, /tmp in its work directory
    layer = Path(create[-1]).parent
    assert create[:-1] == ["overlay", "create", "--sparse", "--size", "8192", "--fakeroot"]
    assert layer.parent == tmp_path / "scratch" / "apptainer" / "layers"
    assert run == exec_command(sif, (out / "eval").resolve(), settings.apptainer,
                               ["--overlay", create[-1], "--workdir", str(layer / "work")])[1:]
    assert not layer.exists()  # removed with the evaluation
    # the eval script is swebench's make_test_spec of the row: the exit code is recorded
    assert "SWEBENCH_TEST_EXIT_CODE=$?" in (out / "eval" / "eval.sh").read_text()
    report = evaluate_patch(row, evaltask.patch("wrong"), backend, out_dir=tmp_path / "run2")
    assert report.status == "unresolved"
    assert [c[0] for c in calls_of(calls)] == ["pull", "overlay", "exec", "overlay", "exec"]  # pulled once


def test_backend_patch_failure_and_timeout(row, fake, tmp_path, monkeypatch):
    settings, _ = fake
    backend = ApptainerBackend(settings)
    report = evaluate_patch(row, evaltask.patch("stale"), backend, out_dir=tmp_path / "a")
    assert (report.status, report.patch_applied) == ("patch_failed", False)
    monkeypatch.setenv("FAKE_APPTAINER_HANG", "1")
    backend = ApptainerBackend(replace(settings, timeout_s=1))
    report = evaluate_patch(row, evaltask.patch("gold"), backend, out_dir=tmp_path / "b", timeout_s=1)
    assert (report.status, report.resolved) == ("timeout", False)


def test_failed_pull_is_an_error_status(row, fake, tmp_path):
    settings, _ = fake
    broken = replace(settings, apptainer=ApptainerSettings.from_section({"executable": "false"}))
    with pytest.raises(ResourceError, match=r"apptainer pull docker://swebench/.* failed \(exit 1\)"):
        pull_image(row, tmp_path / "sif2", broken.apptainer, broken.images)
    assert list((tmp_path / "sif2").iterdir()) == []  # nothing half-pulled is left
    report = evaluate_patch(row, evaltask.patch("gold"), ApptainerBackend(broken), out_dir=tmp_path / "c")
    assert report.status == "error" and "apptainer pull" in report.error


def test_a_pulled_image_of_another_architecture_is_an_error(row, fake, tmp_path, monkeypatch):
    """Pulls ask for the configured architecture; an image that turns out to be of another one
    (a registry without that platform) is removed, and one already on disk is not reused."""
    settings, calls = fake
    images = InstanceImages.from_section({"architecture": "arm64"})
    pull_image(row, tmp_path / "ok", settings.apptainer, images)
    assert calls_of(calls)[-1][1:3] == ["--arch", "arm64"]
    monkeypatch.setenv("FAKE_APPTAINER_PULL_ARCH", "amd64")
    with pytest.raises(ResourceError, match=r"the registry's image is built for amd64, not arm64 "
                                            r"\(evaluation.instance_images.architecture: arm64\)"):
        pull_image(row, tmp_path / "wrong", settings.apptainer, images)
    assert list((tmp_path / "wrong").iterdir()) == []
    old = write_sif(tmp_path / "old" / "demo__calc-1.sif", "amd64")
    with pytest.raises(ResourceError, match=r"demo__calc-1.sif: the image is built for amd64, not arm64 "
                                            r"\(evaluation.instance_images.architecture: arm64\)"):
        pull_image(row, old.parent, settings.apptainer, images)
    assert old.is_file()  # the user's file is left alone; the message says what to do


#: the gold fix plus a conftest.py that writes 80 MiB into the working tree when the tests start:
#: more than Apptainer's default session (64 MiB) holds under --writable-tmpfs
FILLS_THE_LAYER = evaltask.patch("gold") + """diff --git a/conftest.py b/conftest.py
new file mode 100644
index 0000000..1111111
--- /dev/null
+++ b/conftest.py
@@ -0,0 +1,2 @@
+with open("scratch.bin", "wb") as fh:
+    fh.write(bytes(80 * 1024 * 1024))
"""


@pytest.mark.skipif(not fakes_can_mount(), reason="the double makes writes past the writable layer fail only "
                    "as root (a size-limited tmpfs, as in CI); here it cannot")
@pytest.mark.parametrize("mib", [0, 64])
def test_a_full_writable_layer_is_an_evaluation_error_not_unresolved(row, fake, tmp_path, mib):
    """The tests ran and failed, but because the container's writable layer was full (ENOSPC):
    Apptainer's 64 MiB session under --writable-tmpfs (``writable_layer_mib: 0``, the layer of
    8c875c1), or an overlay image too small. An evaluation error (evaluation.on_error decides),
    never a verdict on the patch; the default layer (8 GiB) holds it."""
    settings, _ = fake
    small = replace(settings, apptainer=replace(settings.apptainer, writable_layer_mib=mib))
    report = evaluate_patch(row, FILLS_THE_LAYER, ApptainerBackend(small), out_dir=tmp_path / "full")
    log = (tmp_path / "full" / "eval" / "test_output.txt").read_text()
    assert "No space left on device" in log
    assert report.status == "error" and "infrastructure failure in the log: no_space_left" in report.error
    report = evaluate_patch(row, FILLS_THE_LAYER, ApptainerBackend(settings), out_dir=tmp_path / "roomy")
    assert report.status == "resolved"


@pytest.mark.parametrize(("line", "reason"), [
    ("OSError: [Errno 28] No space left on device: 'x.pyc'", "no_space_left"),
    ("/forgetting/run.sh: line 20:  4242 Killed                  pytest tests", "killed"),
    ("Killed", "killed"),
    ("FATAL:   could not open image /sif/x.sif: failed to retrieve path for /sif/x.sif", "apptainer_failed"),
    ("MemoryError\nCannot allocate memory", "out_of_memory"),
])
def test_infrastructure_failures_in_a_log_are_errors(row, tmp_path, line, reason):
    spec = spec_for(row)
    log = tmp_path / "test_output.txt"
    passed = "\n".join(f"PASSED {t}" for t in spec.FAIL_TO_PASS + spec.PASS_TO_PASS)
    log.write_text(f">>>>> Applied Patch (git apply)\n{START_TEST_OUTPUT}\n{passed}\n{line}\n{END_TEST_OUTPUT}\n")
    verdict = verdict_from_log(spec, log, timed_out=False)
    assert (verdict.status, verdict.note) == ("error", f"infrastructure failure in the log: {reason}")
    log.write_text(f">>>>> Applied Patch (git apply)\n{START_TEST_OUTPUT}\n{passed}\n{END_TEST_OUTPUT}\n")
    assert verdict_from_log(spec, log, timed_out=False).status != "error"  # the same log, intact


def test_a_killed_runs_layer_is_removed_by_the_next_one(fake, tmp_path):
    """A run killed with SIGKILL leaves its layer on scratch; the next layer made on this host
    removes the layers of processes that are gone, never a live one's."""
    import socket

    from forgetting.evaluate.layer import layers_dir, writable_layer

    settings, _ = fake
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    root = layers_dir(settings.apptainer)
    host = socket.gethostname()
    orphan = root / f"trae-x@{host}.{dead.pid}@abc"
    live = root / f"trae-y@{host}.{os.getpid()}@def"
    other_host = root / f"trae-z@elsewhere.{dead.pid}@ghi"
    for d in (orphan, live, other_host):
        (d / "work").mkdir(parents=True)
    with writable_layer(settings.apptainer, "eval") as layer:
        assert Path(layer[1]).is_file()
    assert not orphan.exists() and live.is_dir() and other_host.is_dir()
