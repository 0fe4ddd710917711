"""What a batch of runs needs to know from the study config, resolved and checked once.

Keys (``config/README.md``): ``agent.turn_cap``, ``agent.command_timeout_s``,
``agent.mini`` / ``agent.mini-text`` (``config_file``), ``agent.trae`` (``apptainer_image``,
``install_dir``, ``executable``, ``max_retries``; the schema checks the keys), ``execution.concurrency``,
``execution.run_timeout_s``, ``execution.scratch_dir``, ``model.*``, ``dataset.*`` and
``evaluation.image_dir`` / ``evaluation.apptainer`` (the SWE-bench instance images the agents
work in on the cluster). Every default is the schema's: the settings read the filled sections.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from forgetting.agents import MINI_AGENTS
from forgetting.foundation import config_schema
from forgetting.foundation.errors import ConfigError
from forgetting.instances.dataset_file import DatasetSource, dataset_source
from forgetting.study.evaluation import ApptainerSettings, EvalSettings


def served_name_of(model: Mapping[str, Any]) -> str:
    """The name agents send in requests: ``model.served_name``, else ``model.name``."""
    return str(model.get("served_name") or model["name"])


def _expand(value: str) -> str:
    return os.path.expandvars(os.path.expanduser(str(value)))


def _rooted(root: Path, value: str) -> Path:
    """A config path; a relative one against the project root (as ``Study.path``)."""
    p = Path(value)
    return p if p.is_absolute() else root / p


def _path(root: Path, value: str) -> Path:
    """A config path, ``~`` and ``$VARS`` expanded, relative ones against the project root."""
    return config_schema.config_path(value, root)


def mini_config_files(agent: Mapping[str, Any], root: Path) -> dict[str, Path | None]:
    """``agent.mini.config_file`` / ``agent.mini-text.config_file`` of a checked ``agent``
    section (None: mini's own); a named file that does not exist is an error."""
    files: dict[str, Path | None] = {}
    for name in MINI_AGENTS:
        value = agent[name].get("config_file")  # optional: mini-swe-agent's own config
        files[name] = _path(root, value) if value else None
        if value and not files[name].is_file():  # type: ignore[union-attr]
            raise ConfigError(f"agent.{name}.config_file: {files[name]} not found")
    return files


@dataclass(frozen=True)
class TraeSettings(config_schema.Section):
    #: the Trae agent image (containers/trae-agent.def); its /opt/trae-agent is bound into the
    #: instance container (``--bind IMAGE:/opt/trae-agent:image-src=/opt/trae-agent``)
    apptainer_image: Path | None
    #: or a host directory holding that prefix (bound read-only at /opt/trae-agent)
    install_dir: Path | None
    #: the ``trae-cli`` to start: inside the container by default; for demo tasks (no
    #: container) an executable on this machine
    executable: str
    #: Trae's own retries of a failed model call (its ``max_retries``)
    max_retries: int
    PATH: ClassVar[str] = "agent.trae"

    @classmethod
    def from_filled(cls, values: Mapping[str, Any], *, root: Path = config_schema.PROJECT_ROOT) -> TraeSettings:
        """From a checked ``agent.trae``."""
        trae = values
        image, install = trae.get("apptainer_image"), trae.get("install_dir")  # optional: no image
        if image and install:
            raise ConfigError("agent.trae: give apptainer_image or install_dir, not both")
        return cls(
            apptainer_image=_path(root, image) if image else None,
            install_dir=_path(root, install) if install else None,
            executable=str(trae["executable"]),
            max_retries=int(trae["max_retries"]),
        )


#: the sections a batch of runs reads
RUNNER_SECTIONS: tuple[str, ...] = ("agent", "execution", "model", "dataset", "evaluation")


@dataclass(frozen=True)
class RunnerSettings:
    """Everything a run needs from the config besides its own identity."""

    turn_cap: int
    command_timeout_s: int
    run_timeout_s: int
    concurrency: int
    scratch_dir: Path
    model: Mapping[str, Any]
    dataset_kind: str
    instances: DatasetSource  # the demo's tasks directory; a file or the hub for swebench
    image_dir: Path
    apptainer: str
    apptainer_exec_args: tuple[str, ...]
    #: ``evaluation.apptainer`` whole: the writable layer, the cache and temporary directories
    apptainer_settings: ApptainerSettings
    mini_config_files: Mapping[str, Path | None]
    trae: TraeSettings
    force_rerun: bool
    fixed_test_durations: bool

    @property
    def backend(self) -> str:
        return str(self.model["backend"])

    @property
    def served_name(self) -> str:
        return served_name_of(self.model)

    @property
    def kill_after_s(self) -> float:
        """When a run that ignores its own time limit is killed: the limit plus a grace period."""
        return self.run_timeout_s + max(60.0, 0.1 * self.run_timeout_s)

    @classmethod
    def from_filled(cls, cfg: Mapping[str, Any], *, root: Path, evaluation: EvalSettings) -> RunnerSettings:
        """From a checked study config (every section filled: what :func:`forgetting.study.config.load_study`
        holds) and its evaluation settings; relative paths against ``root`` (the study's root)."""
        agent, execution, model, dataset = cfg["agent"], cfg["execution"], cfg["model"], cfg["dataset"]
        scratch = execution.get("scratch_dir")  # optional: the system's temporary directory
        return cls(
            turn_cap=int(agent["turn_cap"]),
            command_timeout_s=int(agent["command_timeout_s"]),
            run_timeout_s=int(execution["run_timeout_s"]),
            concurrency=int(execution["concurrency"]),
            scratch_dir=Path(_expand(scratch)) if scratch else Path(tempfile.gettempdir()),
            model=model,
            dataset_kind=str(dataset["kind"]),
            instances=(_rooted(root, dataset["instances"]) if dataset["kind"] == "demo" else
                       dataset_source(str(dataset["instances"]), root=root, split=str(dataset["split"]))),
            image_dir=evaluation.image_dir,
            apptainer=evaluation.apptainer.executable,
            apptainer_exec_args=evaluation.apptainer.exec_args,
            apptainer_settings=evaluation.apptainer,
            mini_config_files=mini_config_files(agent, root),
            trae=TraeSettings.from_filled(agent["trae"], root=root),
            force_rerun=bool(cfg["force_rerun"]),
            fixed_test_durations=bool(agent["fixed_test_durations"]),
        )

    @classmethod
    def from_parts(cls, cfg: Mapping[str, Any], *, root: Path = config_schema.PROJECT_ROOT) -> RunnerSettings:
        """From part of a study config handed in apart from a study (a test's), naming at least
        ``model`` and ``dataset``: each section it needs checked, every default the schema's; a
        loaded study holds its own (``study.runner``)."""
        filled = config_schema.filled(cfg)
        for key in RUNNER_SECTIONS:
            filled[key] = config_schema.section(key, filled.get(key))
        scratch = filled["execution"].get("scratch_dir")  # optional: the system's
        evaluation = EvalSettings.from_filled(filled["evaluation"], root=root, scratch=scratch)
        return cls.from_filled(filled, root=root, evaluation=evaluation)
