"""What one run's agent runner gets: the run, its settings, where to write, whom to talk to."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from forgetting.run.workspace import Workspace
from forgetting.study.plan import Run
from forgetting.study.runner import RunnerSettings


@dataclass(frozen=True)
class RunContext:
    run: Run
    settings: RunnerSettings
    out: Path  # the run's temporary directory: trajectory.json, patch.diff, agent.log go here
    scratch: Path  # the run's scratch directory (outside the results), removed afterwards
    workspace: Workspace
    task_text: str
    model_url: str  # the run's proxy, e.g. http://127.0.0.1:PORT/v1
