"""SWE-bench's instance images: their registry names and the CPU architecture they are built for.

Every task runs in its instance image twice — the agents' sandboxes on the GPU nodes and the
evaluation — so the image must be built for the architecture of the nodes that run it (GH200
nodes are aarch64; the images SWE-bench publishes are x86_64). ``evaluation.instance_images``
names them:

* ``namespace``: the registry namespace (``swebench``: Docker Hub's published images);
* ``architecture``: ``x86_64`` or ``arm64`` (swebench's names), by default the host's;
* ``name_template``: how an image is named from those two and the instance id, by default
  swebench's own scheme, ``{namespace}/sweb.eval.{arch}.{id}:latest``.

The scheme is the one of swebench 5.0.2's ``ImageSpec.name`` (``swebench/image_builder/
image_spec.py``): ``sweb.eval.{arch}.{instance_id}:{tag}`` with ``amd64`` written ``x86_64``,
prefixed by ``{namespace}/`` for a registry image, ``__`` in the whole name replaced by
``_1776_`` (Docker Hub allows no double underscore), all lower-cased. ``{id}`` in a template is
the instance id so transformed; ``{instance_id}`` is the id as it is.
"""

from __future__ import annotations

import platform
import string
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from forgetting.foundation import config_schema
from forgetting.foundation.errors import ConfigError

#: swebench's architecture names (its ImageSpec accepts ``amd64``/``arm64`` and names amd64 images ``x86_64``)
ARCHITECTURES: tuple[str, ...] = tuple(config_schema.schema_at("evaluation.instance_images.architecture")["enum"])
#: swebench's name → Go's, as Apptainer (``pull --arch``, the SIF header) names architectures
GOARCH: dict[str, str] = {"x86_64": "amd64", "arm64": "arm64"}
#: ``platform.machine()`` → swebench's name
MACHINES: dict[str, str] = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}
#: the placeholders a ``name_template`` may use
PLACEHOLDERS = frozenset({"namespace", "arch", "id", "instance_id"})


def host_architecture(machine: str | None = None) -> str:
    """This host's architecture in swebench's names (``x86_64`` or ``arm64``)."""
    raw = platform.machine() if machine is None else machine
    try:
        return MACHINES[raw.lower()]
    except KeyError:
        raise ConfigError(
            f"evaluation.instance_images.architecture: this host is {raw!r}, for which SWE-bench has no "
            f"instance images; set it to one of {', '.join(ARCHITECTURES)}"
        ) from None


def goarch_of_host(machine: str | None = None) -> str:
    """This host's architecture in Go's names (``amd64``, ``arm64``), as the SIF header has it;
    another machine's raw name (``ppc64le``) is returned as it is."""
    raw = (platform.machine() if machine is None else machine).lower()
    return GOARCH[MACHINES[raw]] if raw in MACHINES else raw


def check_template(template: str) -> None:
    """A template that names an unknown placeholder, or none of the id, is a ConfigError."""
    try:
        fields = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as exc:
        raise ConfigError(f"evaluation.instance_images.name_template: {template!r} is not a template ({exc})") from None
    unknown = sorted(fields - PLACEHOLDERS)
    if unknown:
        raise ConfigError(
            f"evaluation.instance_images.name_template: unknown placeholder {{{unknown[0]}}}; "
            f"allowed: {', '.join('{' + p + '}' for p in sorted(PLACEHOLDERS))}"
        )
    if not fields & {"id", "instance_id"}:
        raise ConfigError("evaluation.instance_images.name_template: it names no {id} (every task would get one image)")


@dataclass(frozen=True)
class InstanceImages(config_schema.Section):
    """The ``evaluation.instance_images`` section, resolved (the architecture: the host's unless set)."""

    namespace: str
    name_template: str
    #: ``architecture`` as configured; None: the host's, resolved where it is used
    configured_architecture: str | None = None
    PATH: ClassVar[str] = "evaluation.instance_images"

    @classmethod
    def from_filled(cls, values: Mapping[str, Any], **context: Any) -> InstanceImages:
        """From a checked ``evaluation.instance_images`` (its name template checked here)."""
        s = values
        check_template(str(s["name_template"]))
        arch = s.get("architecture")  # optional: the host's
        return cls(namespace=str(s["namespace"]), name_template=str(s["name_template"]),
                   configured_architecture=str(arch) if arch else None)

    @property
    def architecture(self) -> str:
        """``x86_64`` or ``arm64``: as configured, else this host's."""
        return self.configured_architecture or host_architecture()

    @property
    def goarch(self) -> str:
        """The architecture in Go's names: ``apptainer pull --arch`` and the SIF header use them."""
        return GOARCH[self.architecture]

    def name(self, instance_id: str) -> str:
        """The instance's image, e.g. ``swebench/sweb.eval.arm64.django_1776_django-11099:latest``."""
        out = self.name_template.format(
            namespace=self.namespace, arch=self.architecture, id=instance_id.replace("__", "_1776_"),
            instance_id=instance_id,
        )
        return out.lower()

    def uri(self, instance_id: str) -> str:
        """``docker://NAME`` (a template that names its own transport, ``oras://…``, keeps it)."""
        name = self.name(instance_id)
        return name if "://" in name else f"docker://{name}"


def sif_path(image_dir: Path, instance_id: str) -> Path:
    """Where an instance's SIF image lives in ``evaluation.image_dir`` (the evaluation pulls
    it there; the runner's workspaces run the agents in it)."""
    return Path(image_dir) / f"{instance_id}.sif"
