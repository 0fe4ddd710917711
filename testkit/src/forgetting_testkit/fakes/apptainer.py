"""A test double for the ``apptainer`` binary, which these machines lack.

It records its argv (one JSON line per call in ``$FAKE_APPTAINER_CALLS``, when set) and then:

* ``--version``: prints a version line;
* ``pull [--arch ARCH] ... TARGET URI``: writes a small SIF file at TARGET (a real SIF header,
  :mod:`forgetting_testkit.sif`) for ARCH (default: the host's), or for
  ``$FAKE_APPTAINER_PULL_ARCH`` — a registry whose image is of another architecture;
* ``build ... TARGET DEFINITION``: checks that every ``%files`` source exists relative to its
  working directory (fails with ``$FAKE_APPTAINER_FAIL_BUILD`` set), then writes a SIF of the
  host's architecture;
* ``exec ... --bind SRC:DST SIF CMD...`` (the evaluation's form): runs CMD on the host, with the
  container paths mapped to host directories: DST to SRC and ``/testbed`` to ``$FAKE_TESTBED``
  (scripts are rewritten into a scratch copy). With ``$FAKE_APPTAINER_HANG`` set, it hangs;
* ``exec [--nv] [--cleanenv] [--env K=V] ... SIF CMD...`` (any other exec): refuses a SIF of
  another architecture than the host's as Apptainer does ("the image's architecture (…) could
  not run on the host's (…)"), then runs CMD on the host with the environment Apptainer
  would give it: ``--cleanenv`` keeps only ``PATH`` (kept so that other test doubles resolve),
  ``HOME``, ``TERM`` and the proxy variables, then ``APPTAINERENV_*`` and ``--env`` apply. A
  command under ``/`` that the host lacks is looked up under ``$FAKE_APPTAINER_ROOT``;
  ``nvidia-smi`` is only there with ``--nv``.

The host's architecture is ``$FAKE_APPTAINER_HOST_ARCH`` (Go's names: amd64, arm64), else this
machine's. It is not an isolation of any kind.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from forgetting_testkit.sif import CODES, write_sif

#: what Apptainer keeps under --cleanenv (its internal/pkg/util/env/create.go: alwaysPassKeys)
ALWAYS_PASSED = ("TERM", "http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY",
                 "all_proxy", "ALL_PROXY", "ftp_proxy", "FTP_PROXY")
#: exec options that take a value
VALUED = {"--env", "--bind", "-B", "--pwd", "--home", "--env-file", "--overlay", "--mount"}


def host_arch() -> str:
    if os.environ.get("FAKE_APPTAINER_HOST_ARCH"):
        return os.environ["FAKE_APPTAINER_HOST_ARCH"]
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


def sif_arch(path: Path) -> str | None:
    raw = path.read_bytes()[:48] if path.is_file() else b""
    if raw[32:42] != b"SIF_MAGIC\x00":
        return None
    names = {code: name for name, code in CODES.items()}
    return names.get(raw[45:47], "unknown")


def main(argv: list[str]) -> int:
    if os.environ.get("FAKE_APPTAINER_CALLS"):
        with open(os.environ["FAKE_APPTAINER_CALLS"], "a", encoding="utf-8") as fh:
            fh.write(json.dumps(argv) + "\n")
    if argv[:1] in (["--version"], ["version"]):
        print("apptainer version 1.3.4 (test double)")
        return 0
    if argv[0] == "pull":
        arch = argv[argv.index("--arch") + 1] if "--arch" in argv else host_arch()
        arch = os.environ.get("FAKE_APPTAINER_PULL_ARCH") or arch
        write_sif(argv[-2], arch, payload=b"placeholder SIF written by the apptainer test double\n")
        return 0
    if argv[0] == "build":
        return build(Path(argv[-2]), Path(argv[-1]))
    if argv[0] != "exec":
        return 2
    if "--bind" in argv:
        return exec_bound(argv)
    return exec_plain(argv[1:])


def exec_bound(argv: list[str]) -> int:
    if os.environ.get("FAKE_APPTAINER_HANG"):
        time.sleep(600)
    src, dst = argv[argv.index("--bind") + 1].split(":")
    testbed = os.environ["FAKE_TESTBED"]
    scratch = Path(tempfile.mkdtemp(prefix="fake-apptainer-"))
    for f in Path(src).iterdir():
        if f.is_file():
            text = f.read_text(encoding="utf-8")
            if f.suffix == ".sh":
                text = text.replace(dst, str(scratch)).replace("/testbed", testbed)
            (scratch / f.name).write_text(text, encoding="utf-8")
    command = [a.replace(dst, str(scratch)) for a in argv[argv.index("--bind") + 3 :]]
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
    try:
        return os.spawnvpe(os.P_WAIT, command[0], command, env)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def exec_plain(args: list[str]) -> int:
    options: list[str] = []
    envs: dict[str, str] = {}
    i = 0
    while i < len(args) and args[i].startswith("-"):
        if args[i] in VALUED:
            if args[i] == "--env":
                key, _, value = args[i + 1].partition("=")
                envs[key] = value
            i += 2
        else:
            options.append(args[i])
            i += 1
    image, command = Path(args[i]), args[i + 1 :]
    arch = sif_arch(image)
    if arch is None:
        print(f"FATAL:   could not open image {image}: failed to retrieve path for {image}", file=sys.stderr)
        return 255
    if arch != host_arch():
        print(f"FATAL:   the image's architecture ({arch}) could not run on the host's ({host_arch()})",
              file=sys.stderr)
        return 255
    base = {k: v for k, v in os.environ.items() if k in (*ALWAYS_PASSED, "PATH", "HOME")} \
        if "--cleanenv" in options else dict(os.environ)
    prefixed = {k[len("APPTAINERENV_"):]: v for k, v in os.environ.items() if k.startswith("APPTAINERENV_")}
    env = {**base, **prefixed, **envs}
    if not command:
        return 0
    program = command[0]
    if Path(program).name == "nvidia-smi" and "--nv" not in options:
        print("/.singularity.d/actions/exec: line 9: exec: nvidia-smi: not found", file=sys.stderr)
        return 127
    root = os.environ.get("FAKE_APPTAINER_ROOT")
    if program.startswith("/") and not Path(program).exists() and root:
        program = str(Path(root) / program.lstrip("/"))
    try:
        return subprocess.run([program, *command[1:]], env=env).returncode
    except FileNotFoundError:
        print(f"/.singularity.d/actions/exec: line 9: exec: {command[0]}: not found", file=sys.stderr)
        return 127


def build(target: Path, definition: Path) -> int:
    if os.environ.get("FAKE_APPTAINER_FAIL_BUILD"):
        print("FATAL: build failed (test double)", file=sys.stderr)
        return 255
    section = None
    for line in definition.read_text(encoding="utf-8").splitlines():
        if line.startswith("%"):
            section = line.split()[0]
        elif section == "%files" and line.strip() and not line.lstrip().startswith("#"):
            source = line.split()[0]
            if not Path(source).exists():
                print(f"FATAL: %files source {source} not found from {os.getcwd()}", file=sys.stderr)
                return 255
    write_sif(target, host_arch(),
              payload=f"placeholder SIF of {definition.name} written by the apptainer test double\n".encode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
