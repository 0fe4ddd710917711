"""What the runs of one batch share in front of one model endpoint: at most N requests in
flight at once, and a pause after a 429.

The runs are separate processes (forked by the batch, each with its own proxy), so the
limits live in a directory of the batch's scratch space (node-local; every run of a batch
is on the batch's node):

* ``slot-0`` … ``slot-{N-1}``: a request holds an exclusive ``flock`` on one of them while it
  is sent and answered (not while it waits to retry). The kernel releases the lock when the
  holder exits, so a run killed mid-request never leaks a slot.
* ``pause``: after a 429 the request's retry wait ends at a unix time written here (the
  latest one wins); every request of the batch waits until then before its next attempt,
  so one run's ``Retry-After`` holds back the batch instead of each run finding the limit
  again by itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from forgetting.foundation.atomic import write_text

#: how often a request waiting for a free slot looks again
SLOT_POLL_S = 0.01
PAUSE_FILE = "pause"


class SharedLimits:
    """The limits in ``directory`` (made if missing); ``max_in_flight`` None: no slot limit."""

    def __init__(self, directory: str | os.PathLike[str], max_in_flight: int | None = None) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        if max_in_flight is not None and max_in_flight < 1:
            raise ValueError(f"max_in_flight must be ≥ 1, not {max_in_flight}")
        self.max_in_flight = max_in_flight

    def __repr__(self) -> str:
        return f"SharedLimits({str(self.directory)!r}, max_in_flight={self.max_in_flight})"

    def _try_slot(self) -> int | None:
        assert self.max_in_flight is not None
        for i in range(self.max_in_flight):
            fd = os.open(self.directory / f"slot-{i}", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            return fd
        return None

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one of the slots (waiting for one to come free) for the ``with`` block."""
        if self.max_in_flight is None:
            yield
            return
        fd = self._try_slot()
        while fd is None:
            time.sleep(SLOT_POLL_S)
            fd = self._try_slot()
        try:
            yield
        finally:
            os.close(fd)  # releases the lock

    def in_flight(self) -> int:
        """How many slots are held now (for tests and the batch's log)."""
        if self.max_in_flight is None:
            return 0
        held = 0
        for i in range(self.max_in_flight):
            path = self.directory / f"slot-{i}"
            if not path.exists():
                continue
            fd = os.open(path, os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                held += 1
            finally:
                os.close(fd)
        return held

    def paused_until(self) -> float:
        """The unix time before which no request should be sent (0: none)."""
        try:
            return float((self.directory / PAUSE_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return 0.0

    def pause_until(self, when: float) -> None:
        """Hold every request of the batch back until ``when`` (unix time), unless a later
        pause is already set."""
        if when > self.paused_until():
            write_text(self.directory / PAUSE_FILE, f"{when:.3f}\n")

    def wait_out_pause(
        self, sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.time
    ) -> float:
        """Sleep until the batch's pause is over; return the seconds slept."""
        left = self.paused_until() - clock()
        if left <= 0:
            return 0.0
        sleep(left)
        return left
