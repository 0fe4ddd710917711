"""A test double for ``nvidia-smi``, which these machines lack (they have no GPU).

Answers the two forms the pipeline uses: ``-L`` (one ``GPU i: NAME (UUID: …)`` line per GPU)
and ``--query-gpu=FIELDS --format=csv,noheader[,nounits]`` for the fields ``index``, ``name``,
``memory.total``, ``memory.used``, ``memory.free`` and ``driver_version`` (MiB, as the real tool
reports memory: ``81559`` or ``81559 MiB``). The GPUs are ``$FAKE_NVIDIA_SMI_GPUS``:
``NAME:TOTAL_MIB[:USED_MIB]`` entries separated by ``;`` (default: one 96 GB GH200 as
``NVIDIA GH200 480GB:97871``, a value for the test, not a measurement). With
``$FAKE_NVIDIA_SMI_FAIL`` set it fails as the real tool does without a driver (exit 9).
"""

from __future__ import annotations

import os
import sys

DEFAULT = "NVIDIA GH200 480GB:97871"


def gpus() -> list[dict[str, str]]:
    out = []
    for index, entry in enumerate(filter(None, os.environ.get("FAKE_NVIDIA_SMI_GPUS", DEFAULT).split(";"))):
        name, total, *used = entry.split(":")
        used_mib = used[0] if used else "0"
        out.append({"index": str(index), "name": name, "memory.total": total, "memory.used": used_mib,
                    "memory.free": str(int(total) - int(used_mib)), "driver_version": "580.65.06"})
    return out


def main(argv: list[str]) -> int:
    if os.environ.get("FAKE_NVIDIA_SMI_FAIL"):
        print("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
              "Make sure that the latest NVIDIA driver is installed and running.")
        return 9
    if argv == ["-L"]:
        for g in gpus():
            print(f"GPU {g['index']}: {g['name']} (UUID: GPU-00000000-0000-0000-0000-00000000000{g['index']})")
        return 0
    query = next((a.split("=", 1)[1] for a in argv if a.startswith("--query-gpu=")), None)
    fmt = next((a.split("=", 1)[1] for a in argv if a.startswith("--format=")), "")
    if query is None or not fmt.startswith("csv"):
        print("test double: only -L and --query-gpu=… --format=csv are implemented", file=sys.stderr)
        return 2
    units = "nounits" not in fmt
    for g in gpus():
        values = []
        for field in query.split(","):
            value = g[field]
            values.append(f"{value} MiB" if units and field.startswith("memory.") else value)
        print(", ".join(values))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
