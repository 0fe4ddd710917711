"""The ``evaluation`` section of a study config, checked and resolved once."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from forgetting.config import Study

BACKENDS = ("docker", "apptainer", "local")

#: ``apptainer exec`` options: a private /tmp and $HOME, a clean environment, root inside the
#: container (the images' /testbed belongs to root) and a throw-away writable layer
DEFAULT_EXEC_ARGS = ("--contain", "--cleanenv", "--fakeroot", "--writable-tmpfs")
DEFAULT_TEST_CMD = "python -m pytest -rA"


@dataclass(frozen=True)
class ApptainerSettings:
    executable: str = "apptainer"
    exec_args: tuple[str, ...] = DEFAULT_EXEC_ARGS
    pull_args: tuple[str, ...] = ()
    pull_timeout_s: int = 3600


@dataclass(frozen=True)
class DockerSettings:
    python: str = sys.executable
    startup_s: int = 900
    model_name: str = "forgetting"


@dataclass(frozen=True)
class LocalSettings:
    test_cmd: str = DEFAULT_TEST_CMD


@dataclass(frozen=True)
class EvalSettings:
    """How runs are evaluated: the backend, its limits and where its images live."""

    backend: str = "local"
    timeout_s: int = 1800
    workers: int = 1
    image_dir: Path = Path("images/swebench")
    apptainer: ApptainerSettings = field(default_factory=ApptainerSettings)
    docker: DockerSettings = field(default_factory=DockerSettings)
    local: LocalSettings = field(default_factory=LocalSettings)

    @classmethod
    def from_study(cls, study: Study, **overrides: Any) -> EvalSettings:
        """The study's ``evaluation`` section (defaults filled by the schema); ``overrides``
        replace top-level fields (``backend``, ``timeout_s``) as the command line asks."""
        section: Mapping[str, Any] = study.section("evaluation")
        app = section.get("apptainer") or {}
        dock = section.get("docker") or {}
        loc = section.get("local") or {}
        image_dir = os.path.expandvars(os.path.expanduser(str(section.get("image_dir", "images/swebench"))))
        settings = cls(
            backend=str(section.get("backend", "local")),
            timeout_s=int(section.get("timeout_s", 1800)),
            workers=int(section.get("workers", 1)),
            image_dir=study.path(image_dir),
            apptainer=ApptainerSettings(
                executable=str(app.get("executable", "apptainer")),
                exec_args=tuple(app.get("exec_args", DEFAULT_EXEC_ARGS)),
                pull_args=tuple(app.get("pull_args", ())),
                pull_timeout_s=int(app.get("pull_timeout_s", 3600)),
            ),
            docker=DockerSettings(
                python=str(dock.get("python") or sys.executable),
                startup_s=int(dock.get("startup_s", 900)),
                model_name=str(dock.get("model_name", "forgetting")),
            ),
            local=LocalSettings(test_cmd=str(loc.get("test_cmd", DEFAULT_TEST_CMD))),
        )
        clean = {k: v for k, v in overrides.items() if v is not None}
        return replace(settings, **clean) if clean else settings
