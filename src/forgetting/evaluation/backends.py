"""The evaluation backends and what each returns (an :class:`Outcome`).

``docker``    swebench's harness (``swebench.harness.run_evaluation``) as its users run it
``apptainer`` the instance's SWE-bench image as a SIF file, eval script under ``apptainer exec``
``local``     the demo tasks: a scratch repository on this machine, tests run with pytest
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from forgetting.config import Study
from forgetting.errors import ConfigError
from forgetting.evaluation.grading import Grade
from forgetting.evaluation.settings import BACKENDS, EvalSettings


@dataclass
class Outcome:
    """What a backend found: the report fields that depend on running the tests."""

    status: str
    patch_applied: bool | None
    grade: Grade | None = None
    log_path: Path | None = None
    durations: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    note: str | None = None


class Backend(Protocol):
    name: str

    def check(self, instances: Mapping[str, Mapping[str, Any]]) -> None:
        """Raise a one-line UserError if these instances cannot be evaluated here at all
        (no container engine, rows without the fields the backend needs)."""

    def evaluate(self, instance: Mapping[str, Any], patch: str, *, work_dir: Path, label: str) -> Outcome:
        """Evaluate a non-empty ``patch`` on ``instance``. ``work_dir`` is empty and is kept
        (scripts, patch, test log); ``label`` names the evaluation (the run id)."""


def make_backend(settings: EvalSettings, study: Study) -> Backend:
    """The backend ``evaluation.backend`` names, configured from the study."""
    kind = study.raw["dataset"]["kind"]
    if settings.backend == "local":
        if kind != "demo":
            raise ConfigError(
                f"{study.source}: evaluation.backend: 'local' evaluates the demo tasks only "
                f"(dataset.kind demo), not {kind!r}; use 'docker' or 'apptainer' for SWE-bench"
            )
        from forgetting.evaluation.instances import instances_path
        from forgetting.evaluation.local import LocalBackend, demo_checkout

        return LocalBackend(settings, checkout=demo_checkout(instances_path(study)))
    if settings.backend == "apptainer":
        from forgetting.evaluation.apptainer import ApptainerBackend

        return ApptainerBackend(settings)
    if settings.backend == "docker":
        from forgetting.evaluation.docker_harness import DockerBackend

        return DockerBackend(settings)
    raise ConfigError(
        f"{study.source}: evaluation.backend: {settings.backend!r} is not allowed; "
        f"allowed values: {', '.join(BACKENDS)}"
    )
