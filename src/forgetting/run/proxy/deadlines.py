"""Deadlines for the upstream's attempts, kept by one watcher thread.

Each attempt must have its whole reply within ``timeout_s`` (:mod:`forgetting.run.proxy.upstream`).
A ``threading.Timer`` per attempt starts and joins a thread on every model call, about a
millisecond of the proxy's hot path; here one daemon thread sleeps until the earliest armed
deadline and runs its action (shutting the attempt's socket), and arming or disarming one is a
heap push or a flag under a lock.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(order=True)
class Deadline:
    """One armed deadline; :meth:`Deadlines.disarm` it when the attempt ends in time."""

    at: float
    order: int
    action: Callable[[], None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)
    fired: bool = field(default=False, compare=False)


class Deadlines:
    """A heap of deadlines and the one thread that fires them (started on first use)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._heap: list[Deadline] = []
        self._wake = threading.Condition(threading.Lock())
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float, action: Callable[[], None]) -> Deadline:
        """Run ``action`` (on the watcher thread) ``seconds`` from now unless disarmed first."""
        deadline = Deadline(self._clock() + seconds, next(self._order), action)
        with self._wake:
            while self._heap and self._heap[0].cancelled:  # attempts that ended in time
                heapq.heappop(self._heap)
            heapq.heappush(self._heap, deadline)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._watch, name="proxy-deadlines", daemon=True)
                self._thread.start()
            if self._heap[0] is deadline:
                self._wake.notify()
        return deadline

    def disarm(self, deadline: Deadline) -> bool:
        """Cancel ``deadline``; True if its action had already run (the attempt was cut off)."""
        with self._wake:
            deadline.cancelled = True
            return deadline.fired

    def pending(self) -> int:
        """Armed deadlines neither fired nor cancelled (for tests)."""
        with self._wake:
            return sum(1 for d in self._heap if not d.cancelled)

    def _watch(self) -> None:
        while True:
            with self._wake:
                while self._heap and self._heap[0].cancelled:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._wake.wait()
                    continue
                due = self._heap[0]
                wait = due.at - self._clock()
                if wait > 0:
                    self._wake.wait(wait)
                    continue
                heapq.heappop(self._heap)
                due.fired = True
            with contextlib.suppress(Exception):  # an action's failure must not stop the watcher
                due.action()


#: the proxy's one watcher (every upstream of the process shares it)
DEADLINES = Deadlines()
