"""Agent runs: mini-swe-agent and Trae agent, each run behind its own deletion proxy.

Public API::

    run_batch(study, batch, *, manifest=None, log=None) -> dict   # the workflow's run_batch job
    run_one(study, run, **kwargs) -> dict                         # `forgetting run --run-id`
    study.runner                                                  # a loaded study's RunnerSettings

Modules: :mod:`.batch` (scheduling, one model server per batch, forked run processes),
:mod:`.execute` (one run: workspace, proxy, agent), :mod:`.mini` and :mod:`.trae` (the agents),
:mod:`.rundir` (temporary and final run directories), :mod:`.outcome` (statuses),
:mod:`.workspace`, :mod:`.versions`; the settings: :mod:`forgetting.study.runner`. The run directory: docs/runs.md.
"""

from forgetting.run.batch import RunsNotFinished, run_batch, run_one
from forgetting.run.outcome import STATUSES, AgentOutcome, InfraFailure
from forgetting.study.runner import RunnerSettings

__all__ = ["STATUSES", "AgentOutcome", "InfraFailure", "RunnerSettings", "RunsNotFinished", "run_batch", "run_one"]
