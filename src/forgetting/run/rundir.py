"""A run's directory: made in a temporary directory beside its final place, renamed whole.

``results/runs/{agent}/{configuration}/{task}/{repeat}/`` appears only when the run has
finished, with ``run.json`` written last inside it; a run is *finished* when that file
exists. While the run goes on, its files live in ``.{repeat}.tmp-{pid}`` in the same folder
(same file system, so the final rename is atomic; ``pid`` is the run's process). A run
killed at any point leaves only such a hidden directory, which the next invocation of its
batch removes before redoing the run (:func:`remove_stale`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from forgetting.foundation.atomic import replace_dir
from forgetting.foundation.layout import RUN_JSON
from forgetting.records import RunRecord, write_run_record

#: what the run's process reports back to the batch (removed before the rename)
OUTCOME_FILE = ".outcome.json"


def temp_dir_for(run_dir: Path, pid: int) -> Path:
    return run_dir.with_name(f".{run_dir.name}.tmp-{pid}")


def stale_dirs(run_dir: Path) -> list[Path]:
    """Leftovers of interrupted attempts at ``run_dir``: temporary directories, and the old
    directory :func:`forgetting.foundation.atomic.replace_dir` moves aside while it replaces a run."""
    parent = run_dir.parent
    if not parent.is_dir():
        return []
    prefixes = (f".{run_dir.name}.tmp-", f".{run_dir.name}.old-")
    return sorted(p for p in parent.iterdir() if p.name.startswith(prefixes) and p.is_dir())


def remove_stale(run_dirs: Iterable[Path]) -> list[Path]:
    """Remove every leftover of ``run_dirs``; returns what was removed."""
    removed = []
    for run_dir in run_dirs:
        for stale in stale_dirs(run_dir):
            shutil.rmtree(stale, ignore_errors=True)
            removed.append(stale)
    return removed


def finalize(temp: Path, run_dir: Path, record: RunRecord) -> None:
    """Write ``run.json`` last into ``temp`` and rename ``temp`` onto ``run_dir``."""
    outcome = temp / OUTCOME_FILE
    if outcome.exists():
        outcome.unlink()
    write_run_record(temp / RUN_JSON, record)
    _fsync_dir(temp)
    replace_dir(temp, run_dir)
    _fsync_dir(run_dir.parent)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
