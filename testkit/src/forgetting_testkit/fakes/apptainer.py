"""A test double for the ``apptainer`` binary, which these machines lack.

It records its argv (one JSON line per call in ``$FAKE_APPTAINER_CALLS``, when set) and then:

* ``--version``: prints a version line;
* ``pull [--arch ARCH] ... TARGET URI``: writes a SIF at TARGET laid out as Apptainer's build
  writes one (:func:`forgetting_testkit.sif.sif_bytes` with a definition) for ARCH (default: the
  host's), or for ``$FAKE_APPTAINER_PULL_ARCH`` — a registry whose image is of another
  architecture; its layers go to the cache, ``$APPTAINER_CACHEDIR/cache/blob`` (default
  ``~/.apptainer/cache/blob``: internal/pkg/cache/cache.go, DirEnv, SubDirName, OciBlobCacheType),
  its temporary files to ``$APPTAINER_TMPDIR`` (default /tmp: cmd/internal/cli/apptainer.go,
  ``--tmpdir``, EnvKeys TMPDIR), and a path there that is not a writable directory fails it;
* ``build ... TARGET DEFINITION``: checks that every ``%files`` source exists relative to its
  working directory (fails with ``$FAKE_APPTAINER_FAIL_BUILD`` set), then writes a SIF of the
  host's architecture whose root file system holds the ``%files`` (a tar archive, as
  :func:`forgetting_testkit.sif.tree_payload`); ``build --sandbox DIR SIF`` unpacks a SIF's root
  file system into DIR (and ``$FAKE_TESTBED`` as its /testbed);
* ``overlay create [--size MIB] [--sparse] [--fakeroot] FILE``: an ext3 image of that size with
  ``upper/`` and ``work/`` (internal/app/apptainer/overlay_create.go; needs ``mkfs.ext3``);
* ``exec``: :mod:`forgetting_testkit.fakes.apptainer_exec` (binds, image binds and ``id=``,
  ``--contain``, ``--workdir``, the writable layer and its size, ``--cleanenv``, ``--nv``, the
  architecture check). With ``$FAKE_APPTAINER_HANG`` set, it hangs.

The host's architecture is ``$FAKE_APPTAINER_HOST_ARCH`` (Go's names: amd64, arm64), else this
machine's. It is not an isolation of any kind.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from forgetting_testkit.fakes.apptainer_exec import PRIMSYS, exec_main, host_arch, read_partitions
from forgetting_testkit.sif import CODES, tree_payload, write_sif


def sif_arch(path: Path) -> str | None:
    raw = path.read_bytes()[:48] if path.is_file() else b""
    if raw[32:42] != b"SIF_MAGIC\x00":
        return None
    names = {code: name for name, code in CODES.items()}
    return names.get(raw[45:47], "unknown")


#: global options before the command that change only what apptainer prints
GLOBAL_FLAGS = ("--quiet", "-q", "--silent", "-s", "--verbose", "-v", "--debug", "-d", "--nocolor")


def cache_root() -> Path:
    """Apptainer's cache (internal/pkg/cache/cache.go: getCacheParentDir, then SubDirName)."""
    parent = os.environ.get("APPTAINER_CACHEDIR") or str(Path.home() / ".apptainer")
    return Path(parent) / "cache"


def temp_root() -> Path:
    return Path(os.environ.get("APPTAINER_TMPDIR") or "/tmp")


def pull(argv: list[str]) -> int:
    arch = argv[argv.index("--arch") + 1] if "--arch" in argv else host_arch()
    arch = os.environ.get("FAKE_APPTAINER_PULL_ARCH") or arch
    target, uri = argv[-2], argv[-1]
    tmp = temp_root()
    if not tmp.is_dir() or not os.access(tmp, os.W_OK):
        print(f"FATAL:   While making image from oci registry: while creating temporary directory in {tmp}: "
              "no such directory or not writable", file=sys.stderr)
        return 255
    blob = cache_root() / "blob" / "blobs" / "sha256"
    try:
        blob.mkdir(parents=True, exist_ok=True)
        (blob / uri.replace("/", "_").replace(":", "_")).write_text("layer of the apptainer test double\n")
    except OSError as exc:
        print(f"FATAL:   couldn't create cache directory {cache_root()}: {exc.strerror}", file=sys.stderr)
        return 255
    write_sif(target, arch, definition=f"bootstrap: docker\nfrom: {uri}\n",
              payload=tree_payload({}))
    return 0


def overlay_create(args: list[str]) -> int:
    size = 64
    if "--size" in args or "-s" in args:
        flag = "--size" if "--size" in args else "-s"
        size = int(args[args.index(flag) + 1])
    target = Path(args[-1])
    if target.exists():
        print(f"FATAL:   {target} already exists", file=sys.stderr)
        return 255
    mkfs = shutil.which("mkfs.ext3")
    if mkfs is None:
        print("FATAL:   failed to find mkfs.ext3 binary", file=sys.stderr)
        return 255
    layout = Path(tempfile.mkdtemp(prefix="overlay-", dir=temp_root()))
    try:
        (layout / "upper").mkdir()
        (layout / "work").mkdir()
        with open(target, "wb") as fh:
            fh.truncate(size * 1024 * 1024)
        proc = subprocess.run([mkfs, "-q", "-F", "-d", str(layout), str(target)], capture_output=True, text=True)
    finally:
        shutil.rmtree(layout, ignore_errors=True)
    if proc.returncode != 0:
        target.unlink(missing_ok=True)
        print(f"FATAL:   while creating overlay: {proc.stderr.strip()}", file=sys.stderr)
        return 255
    return 0


def sandbox(target: Path, image: Path) -> int:
    parts = read_partitions(image)
    if parts is None:
        print(f"FATAL:   could not open image {image}", file=sys.stderr)
        return 255
    target.mkdir(parents=True)
    root = next((p for p in parts if p.parttype == PRIMSYS), None)
    if root is not None:
        try:
            with tarfile.open(fileobj=io.BytesIO(root.data)) as tar:
                tar.extractall(target, filter="tar")
        except tarfile.TarError:
            pass
    if os.environ.get("FAKE_TESTBED"):
        shutil.copytree(os.environ["FAKE_TESTBED"], target / "testbed", symlinks=True, dirs_exist_ok=True)
    return 0


def main(argv: list[str]) -> int:
    if os.environ.get("FAKE_APPTAINER_CALLS"):
        with open(os.environ["FAKE_APPTAINER_CALLS"], "a", encoding="utf-8") as fh:
            fh.write(json.dumps(argv) + "\n")
    while argv and argv[0] in GLOBAL_FLAGS:  # apptainer's global options (cmd/internal/cli/apptainer.go)
        argv = argv[1:]
    if argv[:1] in (["--version"], ["version"]):
        print("apptainer version 1.3.4 (test double)")
        return 0
    if argv[0] == "pull":
        return pull(argv)
    if argv[0] == "build" and "--sandbox" in argv:
        return sandbox(Path(argv[-2]), Path(argv[-1]))
    if argv[0] == "build":
        return build(Path(argv[-2]), Path(argv[-1]))
    if argv[:2] == ["overlay", "create"]:
        return overlay_create(argv[2:])
    if argv[0] != "exec":
        return 2
    return exec_main(argv[1:])


def build(target: Path, definition: Path) -> int:
    if os.environ.get("FAKE_APPTAINER_FAIL_BUILD"):
        print("FATAL: build failed (test double)", file=sys.stderr)
        return 255
    section = None
    text = definition.read_text(encoding="utf-8")
    tree: dict[str, bytes] = {}
    for line in text.splitlines():
        if line.startswith("%"):
            section = line.split()[0]
        elif section == "%files" and line.strip() and not line.lstrip().startswith("#"):
            source, *dest = line.split()
            if not Path(source).exists():
                print(f"FATAL: %files source {source} not found from {os.getcwd()}", file=sys.stderr)
                return 255
            if Path(source).is_file():
                tree[(dest or [source])[0] + ("*" if os.access(source, os.X_OK) else "")] = Path(source).read_bytes()
    write_sif(target, host_arch(), definition=text, payload=tree_payload(tree))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
