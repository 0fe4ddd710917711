"""One Snakemake at a time per study, and no lock left behind by a killed one.

Snakemake's own lock (``.snakemake/locks/N.input.lock``, ``N.output.lock``: the files one
process reads and writes) records no process: after a ``kill -9`` of the workflow it stays, and
every later invocation stops with "Directory cannot be locked … It can be removed with the
--unlock argument" — advice that, given while another Snakemake of the same study still runs,
lets two of them overwrite each other's runs and tables. And it is weak while both live: the
first process to finish removes the whole lock directory, the other's entries too.

So the Snakefile's main process (not a dry run) also holds, for its whole life, an exclusive
lock (:mod:`forgetting.foundation.locks`) on a file of its own for the study's results directory
(``.snakemake/studies/KEY.lock`` in the working directory; the kernel releases it when the
process ends, however it ends):

* held by another live process: one line naming that process, before any job, status 2;
* taken: no other Snakemake of this study is alive, so any Snakemake lock file that names a
  path under the study's results directory was left by one that was killed; it is removed, and
  the invocation goes on as after ``--unlock`` (lock files of other studies are left alone).
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from forgetting.foundation import locks
from forgetting.foundation.errors import UserError
from forgetting.foundation.seeds import text_hex

#: where the study locks lie, inside the working directory's Snakemake directory
STUDY_LOCKS = Path(".snakemake") / "studies"
#: Snakemake's own lock directory (snakemake/persistence/file.py: ``self._lockdir``)
SNAKEMAKE_LOCKS = Path(".snakemake") / "locks"
_LOCK_FILE = re.compile(r"(\d+)\.(input|output)\.lock")

#: the descriptors of the locks this process holds (open for its whole life)
_held: dict[Path, int] = {}


class StudyBusy(UserError):
    """Another live Snakemake holds this study's lock."""


def lock_path(results: Path, workdir: Path) -> Path:
    """The lock file of the study whose results directory is ``results``."""
    key = text_hex(str(results.resolve()))[:16]
    return workdir / STUDY_LOCKS / f"{key}.lock"


def hold_study_lock(results: str | os.PathLike[str], workdir: str | os.PathLike[str] = ".") -> list[Path]:
    """Take the study's lock for the rest of this process's life (see the module); returns the
    stale Snakemake lock files it removed. :class:`StudyBusy` names the live holder."""
    results, workdir = Path(results), Path(workdir)
    path = lock_path(results, workdir)
    if path in _held:
        return []
    try:
        fd = locks.take(path, str(results.resolve()))
    except locks.Held as held:
        pid, since = held.holder.pid, held.holder.since
        raise StudyBusy(
            f"{results}: another Snakemake is running this study (pid {pid}, since {since}); two at once would "
            f"overwrite each other's runs and tables: wait for it to finish, or stop it (Ctrl-C in its terminal, "
            f"or kill -INT {pid}) and run this again"
        ) from None
    _held[path] = fd
    return remove_stale_locks(results, workdir)


def remove_stale_locks(results: Path, workdir: Path) -> list[Path]:
    """Remove every Snakemake lock file pair (``N.input.lock``, ``N.output.lock``) whose output
    lock names a path under ``results`` — to be called only while holding the study's lock,
    when the process that wrote them cannot be alive."""
    locks = workdir / SNAKEMAKE_LOCKS
    if not locks.is_dir():
        return []
    root = results.resolve()
    stale: set[str] = set()
    for entry in sorted(locks.iterdir()):
        found = _LOCK_FILE.fullmatch(entry.name)
        if not found or found.group(2) != "output" or not entry.is_file() or entry.is_symlink():
            continue
        with contextlib.suppress(OSError):
            if any(_under(workdir / line.strip(), root) for line in entry.read_text(errors="replace").splitlines()
                   if line.strip()):
                stale.add(found.group(1))
    removed = []
    for number in sorted(stale, key=int):
        for kind in ("input", "output"):
            entry = locks / f"{number}.{kind}.lock"
            with contextlib.suppress(FileNotFoundError):
                entry.unlink()
                removed.append(entry)
    return removed


def _under(path: Path, root: Path) -> bool:
    with contextlib.suppress(OSError, ValueError):
        return path.resolve().is_relative_to(root)
    return False
