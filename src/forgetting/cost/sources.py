"""A run's prompts from whatever is at a path: a run directory (its call log, else its
trajectory), a call log (:func:`~forgetting.cost.prompts.from_call_log`) or a mini-swe-agent
trajectory (:func:`~forgetting.cost.trajectory.from_trajectory`); what is there is decided by
:func:`forgetting.records.locate`."""

from __future__ import annotations

import os

from forgetting.cost.prompts import RunPrompts, from_call_log
from forgetting.cost.trajectory import from_trajectory
from forgetting.foundation import layout
from forgetting.foundation.errors import RunOutputError
from forgetting.records import CallLogFile, Located, RunDir, locate


def load_run(
    path: str | os.PathLike[str] | Located, run_id: str | None = None, *, allow_torn: bool = False
) -> RunPrompts:
    """The prompts of a run directory (its call log, else its trajectory), a call log or a
    mini-swe-agent trajectory (what is at ``path``: :func:`forgetting.records.locate`;
    ``allow_torn``: see :func:`from_call_log`)."""
    found = locate(path)
    if isinstance(found, RunDir):
        if found.calls is not None:
            return from_call_log(found.calls, run_id, allow_torn=allow_torn)
        if found.trajectory is None:
            raise RunOutputError(f"{found.path}: no {layout.CALLS} or {layout.TRAJECTORY}; nothing to cost")
        return from_trajectory(found.trajectory, run_id)
    if isinstance(found, CallLogFile):
        return from_call_log(found.path, run_id, allow_torn=allow_torn)
    return from_trajectory(found.path, run_id)
