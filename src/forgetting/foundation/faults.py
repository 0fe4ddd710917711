"""Fault injection for the tests: kill this process, or signal its process group, at a named
point of a stage.

With ``FORGETTING_KILL_AT=NAME`` (or ``NAME@N``) in the environment, the N-th (default: first)
call of :func:`checkpoint` with that name sends SIGKILL to the calling process — the way the
tests interrupt a stage right after it wrote an output, to show that the next invocation
completes, redoes only what was interrupted, and ends byte-identical to an uninterrupted run
(tests/test_kill_resume.py).

With ``FORGETTING_SIGNAL_AT=NAME[@N]:SIGNAL`` (``SIGINT``, ``SIGTERM``, ``SIGKILL``), that
checkpoint sends the signal to the calling process's whole process group instead — what a
terminal's Ctrl-C does (SIGINT to the group: Snakemake and every job), what a session's end or
``kill -TERM -PGID`` does, and a ``kill -9`` of all of it
(tests/workflow/test_interrupted_stages.py). The process then waits for the signal to act, so
nothing after the checkpoint runs before it does. With ``FORGETTING_SIGNAL_ONCE=PATH`` as well,
only the first process to reach the checkpoint (the one that creates ``PATH``) sends it: jobs
that run side by side each reach it, and a terminal's Ctrl-C is one signal, not one per job.

Names: ``run.finalized`` (a run's directory renamed into place with its run.json),
``evaluate.started`` (an evaluation began: its work directory exists, its report not yet),
``evaluate.report`` (a run's eval.json written), ``analyze.output``, ``collect.dataset``,
``stats.output``, ``tables.table``, ``figures.figure`` (one output file or table written).
Unset — always, outside the tests — a checkpoint is two environment lookups.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter

ENV = "FORGETTING_KILL_AT"
SIGNAL_ENV = "FORGETTING_SIGNAL_AT"
ONCE_ENV = "FORGETTING_SIGNAL_ONCE"
#: the signals ``FORGETTING_SIGNAL_AT`` may send
SIGNALS = ("SIGINT", "SIGTERM", "SIGKILL")
_seen: Counter[str] = Counter()


def _due(spec: str, name: str) -> bool:
    """Whether this call of checkpoint ``name`` is the one ``spec`` (``NAME[@N]``) names."""
    target, _, nth = spec.partition("@")
    if target != name:
        return False
    _seen[spec] += 1
    return _seen[spec] == (int(nth) if nth.isdigit() else 1)


def _first(mark: str | None) -> bool:
    """Whether this process is the first to reach the checkpoint (it creates ``mark``); always
    when there is no ``mark``."""
    if not mark:
        return True
    try:
        os.close(os.open(mark, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    except FileExistsError:
        return False
    return True


def checkpoint(name: str) -> None:
    spec = os.environ.get(ENV)
    if spec and _due(spec, name):
        os.kill(os.getpid(), signal.SIGKILL)
    spec = os.environ.get(SIGNAL_ENV)
    if not spec:
        return
    where, _, how = spec.rpartition(":")
    if how not in SIGNALS or not _due(where, name) or not _first(os.environ.get(ONCE_ENV)):
        return
    signum = getattr(signal, how)
    # a held (blocked) signal acts when its block ends: wait for it there, not here
    held = signum in signal.pthread_sigmask(signal.SIG_BLOCK, set())
    os.killpg(os.getpgrp(), signum)
    if held:
        return
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the handler raises (SIGINT, SIGTERM) or the process dies
        time.sleep(0.05)
