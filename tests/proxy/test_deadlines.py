"""The upstream attempts' deadlines: one watcher thread fires each armed deadline once, in
time order, and never one disarmed before its time."""

from __future__ import annotations

import threading
import time

from forgetting.run.proxy.deadlines import Deadlines


def test_an_armed_deadline_fires_once_after_its_time():
    deadlines, fired = Deadlines(), threading.Event()
    started = time.monotonic()
    d = deadlines.arm(0.2, fired.set)
    assert fired.wait(5)
    assert time.monotonic() - started >= 0.2
    assert deadlines.disarm(d) is True  # the attempt learns it was cut off
    assert deadlines.pending() == 0


def test_a_deadline_disarmed_in_time_never_fires():
    deadlines, fired = Deadlines(), threading.Event()
    d = deadlines.arm(0.2, fired.set)
    assert deadlines.disarm(d) is False
    assert not fired.wait(0.5)
    assert deadlines.pending() == 0


def test_deadlines_fire_in_time_order_whatever_order_they_were_armed_in():
    deadlines, order, done = Deadlines(), [], threading.Event()
    deadlines.arm(0.4, lambda: (order.append("late"), done.set()))
    deadlines.arm(0.1, lambda: order.append("early"))
    kept = deadlines.arm(0.25, lambda: order.append("middle"))
    dropped = deadlines.arm(0.2, lambda: order.append("disarmed"))
    deadlines.disarm(dropped)
    assert done.wait(5)
    assert order == ["early", "middle", "late"]
    assert kept.fired


def test_a_failing_action_does_not_stop_the_watcher():
    deadlines, fired = Deadlines(), threading.Event()

    def broken() -> None:
        raise OSError("the socket is gone already")

    deadlines.arm(0.05, broken)
    deadlines.arm(0.1, fired.set)
    assert fired.wait(5)


def test_many_attempts_that_end_in_time_leave_no_pending_deadline():
    deadlines = Deadlines()
    for _ in range(1000):
        deadlines.disarm(deadlines.arm(600, lambda: None))
    assert deadlines.pending() == 0
    assert len(deadlines._heap) <= 1  # ended attempts are dropped as new ones are armed
