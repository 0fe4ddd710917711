"""Fault injection for the tests: kill this process at a named point of a stage.

With ``FORGETTING_KILL_AT=NAME`` (or ``NAME@N``) in the environment, the N-th (default: first)
call of :func:`checkpoint` with that name sends SIGKILL to the calling process — the way the
tests interrupt a stage right after it wrote an output, to show that the next invocation
completes, redoes only what was interrupted, and ends byte-identical to an uninterrupted run
(tests/test_kill_resume.py). Names: ``evaluate.started`` (an evaluation began: its work
directory exists, its report not yet), ``evaluate.report`` (a run's eval.json written),
``analyze.output``, ``collect.dataset``, ``stats.output``, ``tables.table``, ``figures.figure``
(one output file or table written).
Unset — always, outside the tests — a checkpoint is one environment lookup.
"""

from __future__ import annotations

import os
import signal
from collections import Counter

ENV = "FORGETTING_KILL_AT"
_seen: Counter[str] = Counter()


def checkpoint(name: str) -> None:
    spec = os.environ.get(ENV)
    if not spec:
        return
    target, _, nth = spec.partition("@")
    if target != name:
        return
    _seen[name] += 1
    if _seen[name] >= (int(nth) if nth.isdigit() else 1):
        os.kill(os.getpid(), signal.SIGKILL)
