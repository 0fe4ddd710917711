"""Atomic writes: a reader sees the old file or the new one, never half of one.

The new file gets the mode any other new file gets (0666 less the umask), not a temporary
file's 0600: a study's outputs stay readable by whoever the umask lets read them.

Only a regular file is ever replaced: a target that exists and is something else — a
directory, a device node (``/dev/null``), a FIFO, a socket, or a symbolic link to one of
them — is refused (:class:`NotARegularFile`) before anything is written, so a write can never
swap a machine's device node or a pipe for a data file (as root, ``--out /dev/null`` would
otherwise replace the machine's ``/dev/null``).

A temporary file's name says which process on which machine made it
(``.NAME.PID@HOST.XXXXXXXX.tmp``), so a later write of the same file removes what a killed
writer on this machine left (its process is gone) and never a live writer's.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import shutil
import socket
import stat
import zlib
from collections.abc import Iterator, Sequence
from glob import escape as glob_escape
from pathlib import Path
from typing import Any

#: what a write that ran out of room says (errno, and the words pyarrow's errors carry)
FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_FULL_WORDS = {"No space left on device": errno.ENOSPC, "Disk quota exceeded": errno.EDQUOT}


def _disk_full(exc: BaseException, target: Path) -> OSError | None:
    """``exc`` as a plain ``OSError(ENOSPC or EDQUOT, why, target)`` when it says the disk (or
    the quota) is full — pyarrow's own error carries neither the errno nor the file — else None.
    The command line and a workflow job report it as one line (:func:`is_disk_full`)."""
    if not isinstance(exc, OSError):
        return None
    code = exc.errno if exc.errno in FULL_ERRNOS else next((c for w, c in _FULL_WORDS.items() if w in str(exc)), None)
    if code is None:
        return None
    return OSError(code, f"{os.strerror(code)}; nothing was replaced — free space there and rerun", str(target))


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` is a write that ran out of room (never a bug: one line, status 2)."""
    return isinstance(exc, OSError) and exc.errno in FULL_ERRNOS


class NotARegularFile(OSError):
    """The target of a write exists and is not a regular file (an :class:`OSError` on that path:
    the command line prints it as one line naming the path)."""


def kind_of(mode: int) -> str:
    """What a file of ``mode`` is, in words."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def refuse_special(target: str | os.PathLike[str]) -> None:
    """Raise :class:`NotARegularFile` when ``target`` exists (its symbolic links followed) and is
    not a regular file; a missing target, a regular file or a dangling link passes."""
    try:
        mode = os.stat(target).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return
    if not stat.S_ISREG(mode):
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(target))
        raise NotARegularFile(errno.EEXIST, f"exists and is {kind_of(mode)}, not a regular file; "
                              "give the path of a regular file (or of none)", str(target))


def _host() -> str:
    """This machine, in eight hex digits (a host name may hold any character)."""
    return f"{zlib.crc32(socket.gethostname().encode()):08x}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def remove_killed_temps(target: Path) -> list[Path]:
    """Remove the temporary files beside ``target`` that a writer on this machine left when it
    was killed (SIGKILL, a lost node: no ``finally`` ran); return them. A live writer's, or one
    another machine made, stays."""
    host, removed = _host(), []
    for stale in target.parent.glob(f".{glob_escape(target.name)}.*@{host}.*.tmp"):
        pid = stale.name[len(target.name) + 2:].split("@", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()
                removed.append(stale)
    return removed


def _temp_beside(target: Path) -> Path:
    """A new empty file ``.NAME.PID@HOST.XXXXXXXX.tmp`` beside ``target``, created with mode
    0666 less the umask (as ``open(..., "w")`` would create ``target``); what a killed writer
    left there first removed (:func:`remove_killed_temps`)."""
    remove_killed_temps(target)
    while True:
        tmp = target.with_name(f".{target.name}.{os.getpid()}@{_host()}.{secrets.token_hex(4)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        return tmp


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it is renamed onto ``path``.

    On an exception the temporary file is removed and ``path`` is left as it was. A ``path``
    that exists and is not a regular file is refused before anything is written
    (:func:`refuse_special`).
    """
    target = Path(path)
    refuse_special(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp_path = _temp_beside(target)
    try:
        yield tmp_path
        os.replace(tmp_path, target)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        full = _disk_full(exc, target)
        if full is not None:
            raise full from None
        raise


@contextlib.contextmanager
def atomic_paths(paths: Sequence[str | os.PathLike[str]]) -> Iterator[list[Path]]:
    """Yield a temporary path beside each of ``paths``; when the body succeeds, every one is
    renamed onto its path — only then, after all of them are written, so a failure or a kill
    before that leaves each of ``paths`` as it was (a set of files replaced as a whole: the
    last good set stays until a new one is complete). Temporary files an earlier, killed
    attempt left beside ``paths`` are removed first."""
    targets = [Path(p) for p in paths]
    for target in targets:
        refuse_special(target)
    for target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
        for stale in target.parent.glob(f".{glob_escape(target.name)}.*.tmp"):
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()
    temps: list[Path] = []
    try:
        temps.extend(_temp_beside(t) for t in targets)
        yield list(temps)
        for tmp, target in zip(temps, targets, strict=True):
            os.replace(tmp, target)
    except BaseException as exc:
        for tmp in temps:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        full = _disk_full(exc, targets[0]) if targets else None
        if full is not None:
            raise full from None
        raise


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Like :func:`atomic_path`, for a file another program writes (``apptainer build``,
    ``apptainer pull``: they refuse a path that exists): the path yielded, beside ``path``, does
    not exist yet; on success it is renamed onto ``path``, on an exception it is removed."""
    target = Path(path)
    refuse_special(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    partial.unlink(missing_ok=True)
    try:
        yield partial
        os.replace(partial, target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_text(path: str | os.PathLike[str], text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_json(path: str | os.PathLike[str], obj: Any, *, indent: int | None = 2) -> None:
    """Write JSON atomically with sorted keys, so equal objects give equal bytes."""
    write_text(path, json.dumps(obj, indent=indent, sort_keys=True, ensure_ascii=False) + "\n")


def replace_dir(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Move the finished directory ``src`` onto ``dst``, replacing an older ``dst``.

    ``src`` and ``dst`` must be on the same file system. An existing ``dst`` is first moved
    aside and removed only after the rename succeeded, so ``dst`` is never half-written.
    """
    src_p, dst_p = Path(src), Path(dst)
    if dst_p.exists() and not dst_p.is_dir():
        raise NotARegularFile(errno.EEXIST, "exists and is not a directory the pipeline wrote; "
                              "remove it first", str(dst_p))
    dst_p.parent.mkdir(parents=True, exist_ok=True)
    old = None
    if dst_p.exists():
        old = dst_p.with_name(f".{dst_p.name}.old-{os.getpid()}")
        if old.exists():
            shutil.rmtree(old)
        os.replace(dst_p, old)
    os.replace(src_p, dst_p)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
