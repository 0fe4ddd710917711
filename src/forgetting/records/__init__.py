"""Typed run outputs, and one reader per format (docs/DEVELOPING.md).

* :mod:`~forgetting.records.run_record` — :class:`RunRecord`, a finished run's ``run.json``:
  built by the runner and the synthetic-study generator, written and read here only;
* :mod:`~forgetting.records.deletion_record` — :class:`PartDeletion`, one rewritten part of
  one message: made by the deletion engine, written into the call log by the proxy, parsed
  back by every reader (cost, behaviour);
* :mod:`~forgetting.records.mini` — mini-swe-agent trajectories (2.x tool calling and text
  mode, 1.x), :mod:`~forgetting.records.trae` — Trae agent trajectories: one parse each,
  used by the behaviour analysis and the cost reconstruction alike;
* :mod:`~forgetting.records.locate` — what is at a path (a run directory of ours, a
  trajectory, a call log), decided once for ``forgetting label``, ``forgetting cost`` and
  the analysis;
* :mod:`~forgetting.records.fields` — the typed field access they share: a missing or
  wrongly typed field is one error line naming the file and the field.
"""

from forgetting.records.deletion_record import PartDeletion
from forgetting.records.locate import (
    CallLogFile,
    Located,
    RunDir,
    TrajectoryFile,
    find_runs,
    locate,
    open_run_dir,
    read_trajectory,
    run_id_from_path,
)
from forgetting.records.mini import MiniMessage, MiniTrajectory, parse_mini
from forgetting.records.run_record import (
    RUN_STATUSES,
    SYNTHETIC_BACKEND,
    RunRecord,
    is_finished,
    read_run_record,
    write_run_record,
)
from forgetting.records.trae import TraeTrajectory, parse_trae

__all__ = [
    "RUN_STATUSES",
    "SYNTHETIC_BACKEND",
    "CallLogFile",
    "Located",
    "MiniMessage",
    "MiniTrajectory",
    "PartDeletion",
    "RunDir",
    "RunRecord",
    "TraeTrajectory",
    "TrajectoryFile",
    "find_runs",
    "is_finished",
    "locate",
    "open_run_dir",
    "parse_mini",
    "parse_trae",
    "read_run_record",
    "read_trajectory",
    "run_id_from_path",
    "write_run_record",
]
