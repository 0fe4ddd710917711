"""Exclusive locks that name their holder: a POSIX record lock (``fcntl``'s ``F_SETLK``, through
``lockf``) on a file of its own, with the holder's process id, host and start time written into
it. The lock is the process's own: the kernel releases it when that process ends, however it
ends, and a child it forks does not hold it (an ``flock`` would be shared with every forked run
of a batch, and outlive a killed batch while they die). So a lock never outlives a killed
holder; the file stays and is simply taken again. NFS carries these locks between nodes."""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from forgetting.foundation.errors import UserError


@dataclass(frozen=True)
class Holder:
    """What a held lock's file says of its holder."""

    pid: str
    host: str
    since: str


class Held(Exception):
    """A live process holds the lock: ``holder`` names it."""

    def __init__(self, holder: Holder) -> None:
        super().__init__(f"held by pid {holder.pid} on {holder.host} since {holder.since}")
        self.holder = holder


def take(path: Path, note: str = "") -> int:
    """Take the exclusive lock of ``path`` (made, with its folder, if missing) without waiting;
    return its descriptor (this process holds the lock until it closes it or ends; take each
    path once a process: closing any descriptor of the file releases it). :class:`Held` when
    another live process holds it; a :class:`UserError` when ``path`` is a link or no plain
    file; another :class:`OSError` when the file system takes no lock (the caller decides what
    that means)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # never truncate what a link points at
            raise UserError(f"{path}: a symbolic link where a lock file belongs; remove it and run this again") \
                from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO or a device would hang or be written to
        os.close(fd)
        raise UserError(f"{path}: not a plain file where a lock file belongs; remove it and run this again")
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        words = os.pread(fd, 4096, 0).decode("utf-8", "replace").split()
        os.close(fd)
        if exc.errno in (errno.EACCES, errno.EAGAIN):  # POSIX allows either for a lock held elsewhere
            raise Held(_holder(words)) from None
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()} {int(time.time())} {socket.gethostname()} {note}\n".encode(), 0)
    return fd


def _holder(words: list[str]) -> Holder:
    pid = words[0] if words else "unknown"
    since = time.strftime("%H:%M:%S", time.localtime(int(words[1]))) if len(words) > 1 and words[1].isdigit() \
        else "earlier"
    host = words[2] if len(words) > 2 else "this machine"
    return Holder(pid, host, since)
