"""A test double for the ``apptainer`` binary, which these machines lack.

It records its argv (one JSON line per call in ``$FAKE_APPTAINER_CALLS``) and then:
``pull ... TARGET URI`` writes a placeholder SIF at TARGET; ``build ... TARGET DEFINITION``
writes one too, after checking that every ``%files`` source exists relative to its working
directory (and fails with ``$FAKE_APPTAINER_FAIL_BUILD`` set); ``exec ... --bind SRC:DST SIF
CMD...`` runs CMD on the host, with the container paths mapped to host directories: DST to
SRC and ``/testbed`` to ``$FAKE_TESTBED`` (scripts are rewritten into a scratch copy). With
``$FAKE_APPTAINER_HANG`` set, exec hangs instead. It is not an isolation of any kind.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    with open(os.environ["FAKE_APPTAINER_CALLS"], "a", encoding="utf-8") as fh:
        fh.write(json.dumps(argv) + "\n")
    if argv[0] == "pull":
        Path(argv[-2]).write_text("placeholder SIF written by the apptainer test double\n")
        return 0
    if argv[0] == "build":
        return build(Path(argv[-2]), Path(argv[-1]))
    if argv[0] != "exec":
        return 2
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
    target.write_text(f"placeholder SIF of {definition.name} written by the apptainer test double\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
