"""Running one evaluation command with a wall-clock limit, its output logged to a file."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from swebench.harness.constants import TESTS_TIMEOUT


@dataclass(frozen=True)
class Finished:
    returncode: int | None
    timed_out: bool
    seconds: float


def run_logged(
    argv: Sequence[str],
    *,
    log_path: Path,
    timeout_s: float,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Finished:
    """Run ``argv`` with stdout and stderr (interleaved, as a terminal shows them) going to
    ``log_path``. Past ``timeout_s`` the whole process group is killed and the log ends with
    swebench's timeout marker and the harness's own ``Timeout error`` line."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so a timeout kills every child
        )
        try:
            returncode: int | None = proc.wait(timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            returncode, timed_out = None, True
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    seconds = time.monotonic() - start
    if timed_out:
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(f"\n{TESTS_TIMEOUT}\n\nTimeout error: {timeout_s:g} seconds exceeded.\n")
    return Finished(returncode, timed_out, seconds)
