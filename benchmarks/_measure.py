"""Timing and peak memory of a child process (for the benchmark scripts)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass
class Measured:
    seconds: float
    peak_mb: float
    returncode: int
    stdout: str
    stderr: str


def measure(cmd: Sequence[str], cwd: str | None = None, env: dict[str, str] | None = None) -> Measured:
    """Run ``cmd``; wall time and its peak resident memory (ru_maxrss of the child)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        list(cmd), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    out, err = proc.communicate()
    # the child has been reaped by communicate(); fall back to the whole-children rusage
    import resource

    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return Measured(time.perf_counter() - t0, peak_kb / 1024.0, proc.returncode, out, err)


def measure_isolated(cmd: Sequence[str], cwd: str | None = None, env: dict[str, str] | None = None) -> Measured:
    """Like :func:`measure`, but in a fresh wrapper process so the peak is this command's own."""
    import json
    import sys

    code = (
        "import json,subprocess,sys,time,resource;"
        "t=time.perf_counter();p=subprocess.run(json.loads(sys.argv[1]),capture_output=True,text=True);"
        "print(json.dumps([time.perf_counter()-t,resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,"
        "p.returncode,p.stdout,p.stderr]))"
    )
    raw = subprocess.run(
        [sys.executable, "-c", code, json.dumps(list(cmd))], cwd=cwd, env=env, capture_output=True, text=True,
        check=True,
    ).stdout
    secs, peak_kb, rc, out, err = json.loads(raw)
    return Measured(secs, peak_kb / 1024.0, rc, out, err)


def env_with_src(root: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(root, "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env
