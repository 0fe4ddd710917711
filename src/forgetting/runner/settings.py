"""What a batch of runs needs to know from the study config, resolved and checked once.

Keys (``config/README.md``): ``agent.turn_cap``, ``agent.command_timeout_s``,
``agent.mini`` / ``agent.mini-text`` (``config_file``), ``agent.trae`` (``apptainer_image``,
``install_dir``, ``executable``, ``max_retries``; the schema checks the keys), ``execution.concurrency``,
``execution.run_timeout_s``, ``execution.scratch_dir``, ``model.*``, ``dataset.*`` and
``evaluation.image_dir`` / ``evaluation.apptainer`` (the SWE-bench instance images the agents
work in on the cluster).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forgetting.config import Study
from forgetting.errors import ConfigError

#: mini-swe-agent's own benchmark configs: tool calling (the study's) and text actions
MINI_CONFIGS: dict[str, str] = {"mini": "swebench.yaml", "mini-text": "swebench_backticks.yaml"}
MINI_AGENTS = tuple(MINI_CONFIGS)
#: Trae agent's commit the study pins (containers/trae-agent.def builds it)
TRAE_COMMIT = "e839e559ac61bdd0e057c375dd1dee391fee797d"
#: where the Trae agent's self-contained install lives inside the instance container
TRAE_PREFIX = "/opt/trae-agent"



def _expand(value: str) -> str:
    return os.path.expandvars(os.path.expanduser(str(value)))


@dataclass(frozen=True)
class TraeSettings:
    #: the Trae agent image (containers/trae-agent.def); its /opt/trae-agent is bound into the
    #: instance container (``--bind IMAGE:/opt/trae-agent:image-src=/opt/trae-agent``)
    apptainer_image: Path | None = None
    #: or a host directory holding that prefix (bound read-only at /opt/trae-agent)
    install_dir: Path | None = None
    #: the ``trae-cli`` to start: inside the container by default; for demo tasks (no
    #: container) an executable on this machine
    executable: str = f"{TRAE_PREFIX}/bin/trae-cli"
    #: Trae's own retries of a failed model call (its ``max_retries``)
    max_retries: int = 3


@dataclass(frozen=True)
class RunnerSettings:
    """Everything a run needs from the config besides its own identity."""

    turn_cap: int = 200
    command_timeout_s: int = 60
    run_timeout_s: int = 14400
    concurrency: int = 8
    scratch_dir: Path = field(default_factory=lambda: Path(tempfile.gettempdir()))
    model: Mapping[str, Any] = field(default_factory=dict)
    dataset_kind: str = "demo"
    instances: Path = Path("resources/demo/tasks")
    image_dir: Path = Path("images/swebench")
    apptainer: str = "apptainer"
    apptainer_exec_args: tuple[str, ...] = ("--contain", "--cleanenv", "--fakeroot", "--writable-tmpfs")
    mini_config_files: Mapping[str, Path | None] = field(default_factory=dict)
    trae: TraeSettings = field(default_factory=TraeSettings)
    force_rerun: bool = False
    fixed_test_durations: bool = False

    @property
    def backend(self) -> str:
        return str(self.model.get("backend", "scripted"))

    @property
    def served_name(self) -> str:
        return str(self.model.get("served_name") or self.model.get("name"))

    @property
    def kill_after_s(self) -> float:
        """When a run that ignores its own time limit is killed: the limit plus a grace period."""
        return self.run_timeout_s + max(60.0, 0.1 * self.run_timeout_s)

    @staticmethod
    def mini_files_from_study(study: Study) -> dict[str, Path | None]:
        """``agent.mini.config_file`` / ``agent.mini-text.config_file`` (None: mini's own)."""
        agent = study.section("agent")
        mini_files: dict[str, Path | None] = {}
        for name in MINI_AGENTS:
            sub = agent.get(name) or {}
            value = sub.get("config_file")
            mini_files[name] = study.path(_expand(value)) if value else None
            if value and not mini_files[name].is_file():  # type: ignore[union-attr]
                raise ConfigError(f"agent.{name}.config_file: {mini_files[name]} not found")
        return mini_files

    @classmethod
    def from_study(cls, study: Study) -> RunnerSettings:
        from forgetting.evaluation.instances import instances_path
        from forgetting.evaluation.settings import EvalSettings

        agent = study.section("agent")
        execution = study.section("execution")
        mini_files = cls.mini_files_from_study(study)
        trae_section = agent.get("trae") or {}
        image = trae_section.get("apptainer_image")
        install = trae_section.get("install_dir")
        if image and install:
            raise ConfigError("agent.trae: give apptainer_image or install_dir, not both")
        trae = TraeSettings(
            apptainer_image=study.path(_expand(image)) if image else None,
            install_dir=study.path(_expand(install)) if install else None,
            executable=str(trae_section.get("executable", TraeSettings.executable)),
            max_retries=int(trae_section.get("max_retries", TraeSettings.max_retries)),
        )
        evaluation = EvalSettings.from_study(study)
        scratch = execution.get("scratch_dir")
        return cls(
            turn_cap=int(agent.get("turn_cap", 200)),
            command_timeout_s=int(agent.get("command_timeout_s", 60)),
            run_timeout_s=int(execution.get("run_timeout_s", 14400)),
            concurrency=int(execution.get("concurrency", 8)),
            scratch_dir=Path(_expand(scratch)) if scratch else Path(tempfile.gettempdir()),
            model=dict(study.section("model")),
            dataset_kind=str(study.raw["dataset"]["kind"]),
            instances=instances_path(study),
            image_dir=evaluation.image_dir,
            apptainer=evaluation.apptainer.executable,
            apptainer_exec_args=evaluation.apptainer.exec_args,
            mini_config_files=mini_files,
            trae=trae,
            force_rerun=bool(study.raw.get("force_rerun")),
            fixed_test_durations=bool(agent.get("fixed_test_durations", False)),
        )
