"""What is at a path — a run directory of ours, a trajectory file, a call log — decided once.

``forgetting label``, ``forgetting cost`` and the analysis all start here:

* a **run directory** holds ``run.json``, ``calls.jsonl`` or ``trajectory.json``
  (:class:`RunDir`: the run's record when it has one, its trajectory and its call log);
* a directory with none of them but exactly one ``*.traj.json`` is that trajectory;
* a **file** whose first line is a call-log header is a call log (:class:`CallLogFile`);
  one that starts as a JSON object or list is a trajectory (:class:`TrajectoryFile`), whose
  format — mini-swe-agent or Trae agent — :func:`read_trajectory` tells from its content.

:func:`find_runs` is the same for a tree: the path itself when it is a run or a file, else
every run directory (with a trajectory) and trajectory file below it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forgetting.foundation import layout
from forgetting.foundation.errors import RunOutputError, UserError
from forgetting.foundation.inputs import check_stored
from forgetting.records.mini import MiniTrajectory, parse_mini
from forgetting.records.run_record import RunRecord, read_run_record
from forgetting.records.trae import TraeTrajectory, parse_trae

#: the files that make a directory one of our run directories
_RUN_FILES = (layout.RUN_JSON, layout.CALLS, layout.TRAJECTORY)
#: every file of a run directory a stage reads: each must be a regular file, no link
_STORED = (*_RUN_FILES, layout.PATCH, layout.EVAL_JSON)


@dataclass(frozen=True)
class RunDir:
    """A run directory of ours."""

    path: Path
    run_id: str  # run.json's, else from the path (…/runs/AGENT/CONFIGURATION/TASK/REPEAT), else ""
    record: RunRecord | None  # run.json (None when the directory has none)
    trajectory: Path | None  # trajectory.json, when present
    calls: Path | None  # calls.jsonl, when present


@dataclass(frozen=True)
class TrajectoryFile:
    path: Path


@dataclass(frozen=True)
class CallLogFile:
    path: Path


Located = RunDir | TrajectoryFile | CallLogFile


def run_id_from_path(run_dir: str | os.PathLike[str]) -> str | None:
    """``agent/configuration/task/repeat`` for a directory ``…/runs/A/C/T/R``, else None."""
    parts = Path(run_dir).resolve().parts
    if "runs" in parts:
        tail = parts[len(parts) - parts[::-1].index("runs") :]
        if len(tail) == 4:
            return "/".join(tail)
    return None


def is_run_dir(path: Path) -> bool:
    return path.is_dir() and any((path / name).is_file() for name in _RUN_FILES)


def open_run_dir(path: str | os.PathLike[str]) -> RunDir:
    """A run directory's files; its ``run.json`` read (:func:`~forgetting.records.read_run_record`)."""
    p = Path(path)
    if not is_run_dir(p):
        raise RunOutputError(f"{p}: not a run directory (no {', '.join(_RUN_FILES)})")
    for name in _STORED:  # a link out of the results tree, a FIFO: one line naming the file
        check_stored(p / name)
    record = read_run_record(p / layout.RUN_JSON) if (p / layout.RUN_JSON).is_file() else None
    files = {name: p / name if (p / name).is_file() else None for name in (layout.TRAJECTORY, layout.CALLS)}
    run_id = record.run_id if record is not None else run_id_from_path(p) or ""
    return RunDir(p, run_id, record, files[layout.TRAJECTORY], files[layout.CALLS])


def _first_line(path: Path) -> bytes:
    """A file's first line (what it is tells); an error line when it cannot be read."""
    try:
        with open(path, "rb") as fh:
            return fh.readline(1 << 20).strip()
    except OSError as exc:
        raise RunOutputError(f"{path}: cannot read it ({exc.strerror or exc})") from None


def locate(path: str | os.PathLike[str] | Located) -> Located:
    """What ``path`` is (see the module docstring); an error line when it is none of them."""
    if isinstance(path, RunDir | TrajectoryFile | CallLogFile):
        return path
    p = Path(path)
    if p.is_dir():
        if is_run_dir(p):
            return open_run_dir(p)
        trajs = sorted(p.glob("*.traj.json"))
        if len(trajs) == 1:
            return TrajectoryFile(trajs[0])
        raise RunOutputError(
            f"{p}: no {layout.CALLS}, {layout.TRAJECTORY} or single *.traj.json here; not a run directory"
        )
    if not p.is_file():
        raise RunOutputError(f"{p}: no such file or directory")
    head = _first_line(p)
    if head.startswith(b"{") and b'"type":"header"' in head.replace(b" ", b""):
        return CallLogFile(p)
    if head.startswith((b"{", b"[")):
        return TrajectoryFile(p)
    raise RunOutputError(f"{p}: neither a call log (calls.jsonl) nor a trajectory (*.traj.json)")


def find_runs(root: str | os.PathLike[str]) -> list[Located]:
    """The runs ``root`` names: itself when a file or a run directory, else every run
    directory holding a trajectory and every trajectory file (``*.traj.json``,
    ``trajectory*.json``) below it."""
    p = Path(root)
    if not p.exists():
        raise UserError(f"{p}: no such file or directory")
    if p.is_file() or is_run_dir(p):
        return [locate(p)]
    run_dirs = sorted({t.parent for t in p.rglob(layout.TRAJECTORY) if t.is_file()})
    files = sorted(
        t
        for t in p.rglob("*.json")
        if (t.name.endswith(".traj.json") or t.name.startswith("trajectory"))
        and t.is_file()
        and not any(r in t.parents for r in run_dirs)
    )
    found: list[Located] = [*(open_run_dir(d) for d in run_dirs), *(TrajectoryFile(t) for t in files)]
    if not found:
        raise UserError(f"{p}: no run directory or trajectory file (*.traj.json, trajectory*.json) below it")
    return found


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunOutputError(f"{path}: trajectory not found") from None
    except OSError as exc:
        raise RunOutputError(f"{path}: cannot read the trajectory ({exc.strerror or exc})") from None
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise RunOutputError(f"{path}: not a JSON file ({exc.__class__.__name__}); not a trajectory") from None


def read_trajectory(path: str | os.PathLike[str]) -> MiniTrajectory | TraeTrajectory:
    """A trajectory file of either agent, parsed once: a Trae agent trajectory (an object
    with ``llm_interactions``) or a mini-swe-agent one (an object with ``messages``, or a
    bare message list)."""
    p = Path(path)
    data = _read_json(p)
    if isinstance(data, Mapping) and "llm_interactions" in data:
        return parse_trae(data, p)
    if (isinstance(data, Mapping) and "messages" in data) or isinstance(data, list):
        return parse_mini(data, p)
    raise RunOutputError(
        f"{p}: unknown trajectory format (expected a mini-swe-agent *.traj.json with 'messages' "
        "or a Trae agent trajectory with 'llm_interactions')"
    )
