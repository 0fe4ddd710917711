"""The ``evaluation`` section of a study config, checked and resolved once (every default
the schema's: ``evaluation`` in workflow/schemas/config.schema.yaml)."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from forgetting.foundation import config_schema
from forgetting.instances.images import InstanceImages


def _expanded(value: str) -> Path:
    return Path(os.path.expandvars(os.path.expanduser(str(value))))


@dataclass(frozen=True)
class ApptainerSettings(config_schema.Section):
    PATH: ClassVar[str] = "evaluation.apptainer"
    executable: str
    #: ``apptainer exec`` options: a private /tmp and $HOME, a clean environment, root inside
    #: the container (the images' /testbed belongs to root); the writable layer apart
    exec_args: tuple[str, ...]
    pull_args: tuple[str, ...]
    pull_timeout_s: int
    #: each run's and evaluation's writable layer in MiB (0: ``--writable-tmpfs``)
    writable_layer_mib: int
    #: where those layers live
    scratch_dir: Path
    #: ``APPTAINER_CACHEDIR`` and ``APPTAINER_TMPDIR`` of every ``apptainer`` command
    cache_dir: Path
    tmp_dir: Path

    @classmethod
    def from_filled(cls, values: Mapping[str, Any], *,
                    scratch: str | os.PathLike[str] | None = None) -> ApptainerSettings:
        """From a checked ``evaluation.apptainer``; ``scratch``: ``execution.scratch_dir``, where
        the layers, cache and temporary directory go unless the section names its own."""
        s = values
        own = s.get("scratch_dir")  # optional: execution.scratch_dir, else the system's
        root = _expanded(own) if own else (_expanded(scratch) if scratch else Path(tempfile.gettempdir()))
        cache, tmp = s.get("cache_dir"), s.get("tmp_dir")  # optional: under the scratch directory
        return cls(executable=str(s["executable"]), exec_args=tuple(s["exec_args"]),
                   pull_args=tuple(s["pull_args"]), pull_timeout_s=int(s["pull_timeout_s"]),
                   writable_layer_mib=int(s["writable_layer_mib"]), scratch_dir=root,
                   cache_dir=_expanded(cache) if cache else root / "apptainer" / "cache",
                   tmp_dir=_expanded(tmp) if tmp else root / "apptainer" / "tmp")

    def environ(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment of an ``apptainer`` command: ``base`` (this process's) with
        ``APPTAINER_CACHEDIR`` and ``APPTAINER_TMPDIR`` set, both directories made."""
        for d in (self.cache_dir, self.tmp_dir):
            d.mkdir(parents=True, exist_ok=True)
        return {**(os.environ if base is None else base), "APPTAINER_CACHEDIR": str(self.cache_dir),
                "APPTAINER_TMPDIR": str(self.tmp_dir)}


@dataclass(frozen=True)
class DockerSettings(config_schema.Section):
    PATH: ClassVar[str] = "evaluation.docker"
    #: the harness's interpreter (left out: this one), its start-up wait, the model name it records
    python: str
    startup_s: int
    model_name: str

    @classmethod
    def from_filled(cls, values: Mapping[str, Any], **context: Any) -> DockerSettings:
        """From a checked ``evaluation.docker``; ``python`` left out: this interpreter."""
        s = values
        python = s.get("python")  # optional: the running interpreter
        return cls(python=str(python) if python else sys.executable, startup_s=int(s["startup_s"]),
                   model_name=str(s["model_name"]))


@dataclass(frozen=True)
class LocalSettings(config_schema.Section):
    PATH: ClassVar[str] = "evaluation.local"
    test_cmd: str

    @classmethod
    def from_filled(cls, values: Mapping[str, Any], **context: Any) -> LocalSettings:
        """From a checked ``evaluation.local``."""
        return cls(test_cmd=str(values["test_cmd"]))


@dataclass(frozen=True)
class EvalSettings(config_schema.Section):
    """How runs are evaluated: the backend, its limits and where its images live."""

    backend: str
    timeout_s: int
    workers: int
    image_dir: Path
    #: ``evaluation.image_dir`` as given (the workflow names it so: relative paths stay relative)
    image_dir_value: str
    #: the instance images' names and architecture (``evaluation.instance_images``)
    images: InstanceImages
    apptainer: ApptainerSettings
    docker: DockerSettings
    local: LocalSettings
    PATH: ClassVar[str] = "evaluation"

    @classmethod
    def from_filled(cls, values: Mapping[str, Any], *, root: Path = config_schema.PROJECT_ROOT,
                    scratch: str | os.PathLike[str] | None = None) -> EvalSettings:
        """From a checked ``evaluation`` section; a relative ``image_dir`` is resolved against
        ``root`` (a study's root, by default this checkout); ``scratch``: ``execution.scratch_dir``."""
        s = values
        image_dir = Path(os.path.expandvars(os.path.expanduser(str(s["image_dir"]))))
        return cls(
            backend=str(s["backend"]),
            timeout_s=int(s["timeout_s"]),
            workers=int(s["workers"]),
            image_dir=image_dir if image_dir.is_absolute() else root / image_dir,
            image_dir_value=str(s["image_dir"]),
            images=InstanceImages.from_filled(s["instance_images"]),
            apptainer=ApptainerSettings.from_filled(s["apptainer"], scratch=scratch),
            docker=DockerSettings.from_filled(s["docker"]),
            local=LocalSettings.from_filled(s["local"]),
        )
