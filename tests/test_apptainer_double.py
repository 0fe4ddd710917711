"""The apptainer test double against the behaviours of Apptainer's source that the project
relies on (each cited in forgetting_testkit/fakes/apptainer_exec.py). Apptainer cannot run
here; these keep the double honest where the pipeline's own tests lean on it."""

from __future__ import annotations

import os
import subprocess

import pytest

from forgetting_testkit import fakes
from forgetting_testkit.fakes.apptainer_exec import ELF_MAGIC, can_mount, host_arch
from forgetting_testkit.sif import sif_bytes, tree_payload, write_sif

OTHER = "arm64" if host_arch() == "amd64" else "amd64"


@pytest.fixture
def box(tmp_path, monkeypatch):
    exe = fakes.install(fakes.APPTAINER, tmp_path / "bin" / "apptainer")
    testbed = tmp_path / "testbed"
    testbed.mkdir()
    (testbed / "code.py").write_text("x = 1\n")
    monkeypatch.setenv("FAKE_TESTBED", str(testbed))
    image = write_sif(tmp_path / "task.sif", host_arch(), definition="Bootstrap: docker\n", payload=tree_payload({}))

    def run(*args: str, **kw) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120, **kw)

    return run, image, testbed


def test_contain_gives_each_exec_a_fresh_tmp_and_workdir_keeps_it(box, tmp_path):
    run, image, _ = box
    write = ("exec", "--contain", str(image), "/bin/sh", "-c", "echo kept > /tmp/note")
    read = ("exec", "--contain", str(image), "/bin/cat", "/tmp/note")
    assert run(*write).returncode == 0
    assert run(*read).returncode != 0  # addTmpMount: the session's /tmp, gone with the exec
    work = tmp_path / "work"
    assert run("exec", "--contain", "--workdir", str(work), *write[2:]).returncode == 0
    proc = run("exec", "--contain", "--workdir", str(work), *read[2:])
    assert (proc.returncode, proc.stdout) == (0, "kept\n")  # WORKDIR/tmp, kept between execs
    assert (work / "tmp" / "note").is_file() and (work / "var_tmp").is_dir()


@pytest.mark.skipif(not can_mount(), reason="a size-limited tmpfs and overlayfs need root (as in CI); "
                    "without them the double cannot make writes past the size fail")
def test_writable_tmpfs_is_the_64_mib_session_and_an_overlay_image_its_own_size(box, tmp_path):
    run, image, testbed = box
    fill = ("/bin/sh", "-c", "dd if=/dev/zero of=/testbed/blob bs=1M count=80 2>&1; echo x >> /testbed/code.py")
    proc = run("exec", "--contain", "--writable-tmpfs", str(image), *fill)
    assert "No space left on device" in proc.stdout
    assert (testbed / "code.py").read_text() == "x = 1\n" and not (testbed / "blob").exists()  # image untouched
    overlay = tmp_path / "overlay.img"
    assert run("overlay", "create", "--sparse", "--size", "200", str(overlay)).returncode == 0
    proc = run("exec", "--contain", "--overlay", str(overlay), str(image), *fill)
    assert proc.returncode == 0 and "No space left" not in proc.stdout
    proc = run("exec", "--contain", "--overlay", str(overlay), str(image), "/bin/cat", "/testbed/code.py")
    assert proc.stdout == "x = 1\nx\n"  # the overlay image keeps its layer between execs
    small = tmp_path / "small.img"
    assert run("overlay", "create", "--size", "16", str(small)).returncode == 0
    proc = run("exec", "--overlay", str(small), str(image), *fill)
    assert "No space left on device" in proc.stdout


def test_image_binds_follow_id_and_the_first_data_partition(box, tmp_path):
    run, image, _ = box
    tree = tree_payload({"/opt/tool/marker": "root fs\n"})
    built = write_sif(tmp_path / "built.sif", host_arch(), definition="Bootstrap: docker\n", payload=tree)
    ok = run("exec", "--bind", f"{built}:/t:id=4,image-src=/opt/tool", str(image), "/bin/cat", "/t/marker")
    assert (ok.returncode, ok.stdout) == (0, "root fs\n")
    for opts, message in [("image-src=/opt/tool", f"no data partition found in {built}"),
                          ("id=0", "id number must be greater than 0"),
                          ("id=4,image-src=/nope", f"/nope doesn't exist in image {built}"),
                          ("fake_option=fake", "fake_option=fake is not a valid bind option")]:
        proc = run("exec", "--bind", f"{built}:/t:{opts}", str(image), "/bin/true")
        assert proc.returncode == 255 and message in proc.stderr, (opts, proc.stderr)
    data = tmp_path / "data.sif"
    data.write_bytes(sif_bytes(host_arch(), data=(tree_payload({"/d": "data\n"}),)))
    proc = run("exec", "--bind", f"{data}:/t:image-src=/", str(image), "/bin/cat", "/t/d")
    assert (proc.returncode, proc.stdout) == (0, "data\n")


def test_architecture_refused_unless_emulated(box, tmp_path, monkeypatch):
    run, _, _ = box
    foreign = write_sif(tmp_path / "foreign.sif", OTHER, definition="Bootstrap: docker\n")
    binfmt = tmp_path / "binfmt_misc"
    binfmt.mkdir()
    monkeypatch.setenv("FAKE_APPTAINER_BINFMT_MISC", str(binfmt))
    proc = run("exec", str(foreign), "/bin/true", env={**os.environ})
    assert proc.returncode == 255
    assert f"the image's architecture ({OTHER}) could not run on the host's ({host_arch()})" in proc.stderr
    (binfmt / "status").write_text("enabled\n")
    (binfmt / f"qemu-{OTHER}").write_text(f"enabled\ninterpreter /usr/bin/qemu\nflags: F\noffset 0\n"
                                          f"magic {ELF_MAGIC[OTHER]}\n")
    assert run("exec", str(foreign), "/bin/true", env={**os.environ}).returncode == 0  # persistent emulation


def test_cleanenv_and_nv(box, monkeypatch):
    run, image, _ = box
    monkeypatch.setenv("SECRET_OF_THE_HOST", "1")
    monkeypatch.setenv("APPTAINERENV_PASSED", "yes")
    monkeypatch.setenv("http_proxy", "http://proxy:3128")
    proc = run("exec", "--cleanenv", "--env", "ADDED=1", str(image), "/usr/bin/env", env={**os.environ})
    names = {line.split("=", 1)[0] for line in proc.stdout.splitlines()}
    assert {"PASSED", "ADDED", "http_proxy"} <= names and "SECRET_OF_THE_HOST" not in names
    assert "SECRET_OF_THE_HOST" in run("exec", str(image), "/usr/bin/env", env={**os.environ}).stdout
    proc = run("exec", str(image), "nvidia-smi", env={**os.environ})
    assert proc.returncode == 127 and "nvidia-smi: not found" in proc.stderr


def test_pull_uses_the_configured_cache_and_temporary_directories(box, tmp_path, monkeypatch):
    run, _, _ = box
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("APPTAINER_CACHEDIR", str(tmp_path / "scratch" / "cache"))
    monkeypatch.setenv("APPTAINER_TMPDIR", str(tmp_path / "scratch" / "tmp"))
    proc = run("pull", str(tmp_path / "a.sif"), "docker://x/y:1", env={**os.environ})
    assert proc.returncode == 255 and "scratch/tmp" in proc.stderr  # a temporary directory that is not there
    (tmp_path / "scratch" / "tmp").mkdir(parents=True)
    assert run("pull", str(tmp_path / "a.sif"), "docker://x/y:1", env={**os.environ}).returncode == 0
    assert list((tmp_path / "scratch" / "cache" / "cache" / "blob").rglob("*_y_1"))
    assert not (tmp_path / "home" / ".apptainer").exists()
    monkeypatch.delenv("APPTAINER_CACHEDIR")
    assert run("pull", str(tmp_path / "b.sif"), "docker://x/y:1", env={**os.environ}).returncode == 0
    assert (tmp_path / "home" / ".apptainer" / "cache" / "blob").is_dir()  # Apptainer's default


def test_contain_hides_the_images_home_and_no_home_shows_it(box, tmp_path, monkeypatch):
    """container_linux.go (getHomePaths, addHomeStagingDir): under --fakeroot the home is /root;
    with --contain it is a fresh empty directory (WORKDIR/home with --workdir) over the image's
    own /root, so its .bashrc is gone; --no-home mounts nothing and the image's /root shows."""
    run, image, _ = box
    root = tmp_path / "image-root"
    (root / "root").mkdir(parents=True)
    (root / "root" / ".bashrc").write_text("export ACTIVATED=testbed\n")
    monkeypatch.setenv("FAKE_APPTAINER_ROOT", str(root))
    shell = ("/bin/bash", "-c", 'echo "[$ACTIVATED]"; ls -A "$HOME"')
    contained = ("exec", "--contain", "--cleanenv", "--fakeroot", "--env", "BASH_ENV=/root/.bashrc")
    proc = run(*contained, str(image), *shell)
    assert (proc.returncode, proc.stdout) == (0, "[]\n"), proc.stderr
    work = tmp_path / "work"
    proc = run(*contained, "--workdir", str(work), str(image), *shell)
    assert (proc.returncode, proc.stdout) == (0, "[]\n") and (work / "home").is_dir()
    proc = run(*contained, "--no-home", str(image), *shell)
    assert (proc.returncode, proc.stdout) == (0, "[testbed]\n.bashrc\n"), proc.stderr
