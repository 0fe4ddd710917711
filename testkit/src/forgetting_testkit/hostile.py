"""Running a hostile input through the command line and judging the outcome, for the
hostile-input tests (``tests/hostile/``).

The contract every case is held to (:func:`problems`): the command either succeeds (status 0)
or ends with status 2 and exactly one ``error:`` line on stderr; no exception escapes
:func:`forgetting.cli.main` (a traceback), it ends within its time limit (no hang), and the
files it must not touch — the case's own inputs, any output that existed before, the shared
synthetic study — are as they were (their size, modification time and mode, from
:func:`snapshot`). A stage's log (``logs/*.log``) may record the error.

Most cases run in this process (:func:`run_main`, the same ``main`` the console script
calls, with stdout and stderr captured); :func:`run_subprocess` runs one as a real process.
:func:`without_dac_override` makes permissions bite when the tests run as root.
"""

from __future__ import annotations

import contextlib
import copy
import ctypes
import io
import os
import re
import signal
import subprocess
import sys
import traceback
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from forgetting import cli
from forgetting_testkit.checkout import ROOT, cli_env

#: the demo config the cases start from, as shipped
DEMO: dict[str, Any] = yaml.safe_load((ROOT / "config/demo.yaml").read_text())


def demo_config(d: Path, name: str = "study.yaml", **changes: Any) -> Path:
    """The demo config with absolute resource paths and its results under ``d``, ``changes``
    applied (a key ``a__b`` or ``a.b`` sets ``a.b``), written to ``d/name`` (a NaN as ``.nan``)."""
    cfg = copy.deepcopy(DEMO)
    cfg["study"]["results_dir"] = str(d / "results")
    cfg["tasks"]["ids_file"] = str(ROOT / "resources/demo/tasks.txt")
    cfg["dataset"]["instances"] = str(ROOT / "resources/demo/tasks")
    cfg["pricing"]["dir"] = str(ROOT / "resources/pricing")
    for key, value in changes.items():
        node = cfg
        *parents, last = re.split(r"__|\.", key)
        for k in parents:
            node = node.setdefault(k, {})
        node[last] = value
    d.mkdir(parents=True, exist_ok=True)
    path = d / name
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


#: seconds one case may take before it counts as a hang
CASE_TIMEOUT_S = 30.0


class Hang(BaseException):
    """Raised in a case that ran past its time limit (a BaseException: nothing catches it)."""


@dataclass
class Outcome:
    argv: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    traceback: str | None = None
    hang: bool = False
    changed: list[str] = field(default_factory=list)

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("error:")]


Snapshot = dict[str, tuple[int, int, int] | None]


def snapshot(*roots: Path, skip_logs: bool = True) -> Snapshot:
    """Every file and directory below ``roots``: (size, mtime_ns, mode) of a file, None for a
    directory. A stage's ``logs/`` directory is left out (its log may record the error)."""
    out: Snapshot = {}
    for root in roots:
        if not root.exists():
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            if skip_logs:
                dirnames[:] = [d for d in dirnames if d != "logs"]
            here = Path(dirpath)
            out[str(here)] = None
            for name in filenames:
                p = here / name
                st = p.lstat()
                out[str(p)] = (st.st_size, st.st_mtime_ns, st.st_mode)
    return out


def changed(before: Snapshot, after: Snapshot, allowed: Iterable[Path] = ()) -> list[str]:
    """The files that appeared, went or changed between two snapshots, and the directories
    that went, ``allowed`` (and what lies below them) aside. A new directory that holds no new
    file (the folder of a stage's log) is no output."""
    ok = [str(a) for a in allowed]
    diff = sorted(
        p for p in before.keys() | after.keys()
        if before.get(p, 0) != after.get(p, 0) and not (p not in before and after[p] is None)
    )
    return [p for p in diff if not any(p == a or p.startswith(a + os.sep) for a in ok)]


def _on_alarm(signum: int, frame: Any) -> None:
    raise Hang()


def run_main(argv: Sequence[str], *, timeout: float = CASE_TIMEOUT_S, cwd: Path = ROOT) -> Outcome:
    """``forgetting ARGV`` in this process: ``forgetting.cli.main`` with stdout and stderr
    captured, stopped after ``timeout`` seconds (SIGALRM)."""
    out, err = io.StringIO(), io.StringIO()
    outcome = Outcome(list(argv), None, "", "")
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    here = os.getcwd()
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            signal.setitimer(signal.ITIMER_REAL, timeout)
            try:
                outcome.returncode = int(cli.main(list(argv)) or 0)
            except SystemExit as exc:  # argparse
                outcome.returncode = exc.code if isinstance(exc.code, int) else 1
            except Hang:
                outcome.hang = True
            except BaseException:
                outcome.traceback = traceback.format_exc()
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        signal.signal(signal.SIGALRM, previous)
        os.chdir(here)
    outcome.stdout, outcome.stderr = out.getvalue(), err.getvalue()
    return outcome


def run_subprocess(
    argv: Sequence[str], *, timeout: float = CASE_TIMEOUT_S * 2, cwd: Path = ROOT, env: dict[str, str] | None = None
) -> Outcome:
    """``python -m forgetting ARGV`` as a real process (a traceback: "Traceback" on stderr)."""
    outcome = Outcome(list(argv), None, "", "")
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "forgetting", *argv], cwd=cwd, env=cli_env(env), capture_output=True,
            text=True, timeout=timeout, errors="replace",
        )
    except subprocess.TimeoutExpired as exc:
        outcome.hang = True
        outcome.stderr = (exc.stderr or b"").decode("utf-8", "replace") if isinstance(exc.stderr, bytes) else ""
        return outcome
    outcome.returncode, outcome.stdout, outcome.stderr = proc.returncode, proc.stdout, proc.stderr
    if "Traceback (most recent call last)" in proc.stderr:
        outcome.traceback = proc.stderr
    return outcome


def problems(outcome: Outcome, *, expect: str = "any") -> list[str]:
    """What is wrong with ``outcome`` under the contract (module docstring); ``expect``:
    ``"error"`` (it must fail with status 2), ``"ok"`` (it must succeed) or ``"any"``."""
    found = []
    if outcome.traceback is not None:
        found.append(f"traceback:\n{outcome.traceback}")
    if outcome.hang:
        found.append("hang: it did not end within its time limit")
    if outcome.returncode is not None and outcome.traceback is None and not outcome.hang:
        if outcome.returncode == 2:
            if len(outcome.error_lines) != 1:
                found.append(f"status 2 with {len(outcome.error_lines)} 'error:' lines:\n{outcome.stderr}")
            if expect == "ok":
                found.append(f"expected success, got: {outcome.stderr.strip()}")
        elif outcome.returncode == 0:
            if expect == "error":
                found.append(f"expected an error, it succeeded: {outcome.stdout[-300:]}")
        else:
            found.append(f"status {outcome.returncode} (expected 0 or 2):\n{outcome.stderr[-2000:]}")
    if outcome.changed:
        found.append(f"files changed or lost: {outcome.changed[:5]}")
    return found


# -- permissions for root: CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH off the effective set ----------

class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


_CAP_V3 = 0x20080522
_DAC = (1 << 1) | (1 << 2)  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH


@contextlib.contextmanager
def without_dac_override() -> Iterator[bool]:
    """File permissions bite inside the block, even for root (this thread drops the capabilities
    that override them from its effective set, and takes them back after). Yields whether
    permissions are enforced (False: a root that cannot drop them; the caller skips)."""
    if os.geteuid() != 0:
        yield True
        return
    libc = ctypes.CDLL(None, use_errno=True)
    header, data = _CapHeader(_CAP_V3, 0), (_CapData * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        yield False
        return
    saved = data[0].effective
    data[0].effective = saved & ~_DAC
    if libc.capset(ctypes.byref(header), data) != 0:
        yield False
        return
    try:
        yield True
    finally:
        data[0].effective = saved
        libc.capset(ctypes.byref(header), data)


def socket_exchange(host: str, port: int, data: bytes, *, timeout: float,
                    half_close: bool = False) -> tuple[int | None, bytes, bool]:
    """Send ``data`` on a fresh connection to ``host:port``: (the status of the first reply or
    None, what came back, whether it was answered within ``timeout``). ``half_close``: shut the
    sending side after ``data`` (a server that stopped reading — a rejected body — may still reply)."""
    import socket

    chunks = []
    with socket.create_connection((host, port), timeout=timeout) as s:
        try:
            s.sendall(data)
            if half_close:
                s.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            if not half_close:
                raise
        try:
            while chunk := s.recv(65536):
                chunks.append(chunk)
        except TimeoutError:
            return None, b"".join(chunks), False
        except ConnectionResetError:
            pass
    reply = b"".join(chunks)
    match = re.match(rb"HTTP/1\.[01] (\d{3}) ", reply) or re.search(rb"Error code: (\d{3})", reply)  # HTTP/0.9
    return (int(match.group(1)) if match else None), reply, True
