"""The evaluation backends: the interface (:class:`Backend`), what each returns (an
:class:`Outcome`), and the backends by name (:data:`BACKENDS`).

``docker``    swebench's harness (``swebench.harness.run_evaluation``) as its users run it
``apptainer`` the instance's SWE-bench image as a SIF file, eval script under ``apptainer exec``
``local``     the demo tasks: a scratch repository on this machine, tests run with pytest

Adding a backend: a class with the :class:`Backend` methods in a module of its own, one line
in :data:`BACKENDS` and its name in the schema's ``evaluation.backend`` list.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, Self

from forgetting.evaluate.grading import Grade
from forgetting.foundation.errors import ConfigError
from forgetting.study.config import Study
from forgetting.study.evaluation import EvalSettings

#: ``evaluation.backend`` → ``module:Class``, imported on first use (docker and apptainer
#: import swebench's harness)
BACKENDS: dict[str, str] = {
    "docker": "forgetting.evaluate.docker_harness:DockerBackend",
    "apptainer": "forgetting.evaluate.apptainer:ApptainerBackend",
    "local": "forgetting.evaluate.local:LocalBackend",
}


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

    @classmethod
    def for_study(cls, settings: EvalSettings, study: Study) -> Backend:
        """The backend configured from the study (ConfigError if it cannot evaluate it)."""

    def check(self, instances: Mapping[str, Mapping[str, Any]]) -> None:
        """Raise a one-line UserError if these instances cannot be evaluated here at all
        (no container engine, rows without the fields the backend needs)."""

    def evaluate(self, instance: Mapping[str, Any], patch: str, *, work_dir: Path, label: str) -> Outcome:
        """Evaluate a non-empty ``patch`` on ``instance``. ``work_dir`` is empty and is kept
        (scripts, patch, test log); ``label`` names the evaluation (the run id)."""


class ConfiguredBySettings:
    """The part of a backend configured by the evaluation settings alone (docker, apptainer)."""

    def __init__(self, settings: EvalSettings) -> None:
        self.settings = settings

    @classmethod
    def for_study(cls, settings: EvalSettings, study: Study) -> Self:
        return cls(settings)


def make_backend(settings: EvalSettings, study: Study) -> Backend:
    """The backend ``evaluation.backend`` names, configured from the study."""
    if settings.backend not in BACKENDS:
        raise ConfigError(
            f"{study.source}: evaluation.backend: {settings.backend!r} is not allowed; "
            f"allowed values: {', '.join(BACKENDS)}"
        )
    module, _, name = BACKENDS[settings.backend].partition(":")
    backend: Backend = getattr(importlib.import_module(module), name).for_study(settings, study)
    return backend
