"""The cluster route: where the agents, their sandboxes and the evaluation run, and for which
architecture their images are (``cluster.route``; docs/cluster.md, *Architecture*).

* ``A``: everything on nodes of the GPU partition's architecture, arm64 instance images;
* ``B``: the published x86_64 instance images on the GPU nodes under qemu-user emulation;
* ``C``: the agents, sandboxes and evaluation on an x86_64 CPU partition, the model served from
  the GPU partition by a job of its own (``model.backend: endpoint``).

The workflow checks a route before any job (:func:`placement_problems`) against the partition
architecture the profile gives each rule (the resource ``partition_arch``, read from the
profile's ``set-resources`` and ``default-resources`` with Snakemake's precedence) and the
architecture of the machine Snakemake runs on — every submitted job runs Snakemake's own
Python (the Slurm plugin starts each job with the submitting interpreter) and, for a rule with
``conda:``, an environment Snakemake built where it runs.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from forgetting.foundation.errors import UserError
from forgetting.instances.images import ARCHITECTURES, host_architecture
from forgetting.study.config import Study

#: the instance images' architecture each route runs
IMAGE_ARCH: dict[str, str] = {"A": "arm64", "B": "x86_64", "C": "x86_64"}
#: where a test rehearses another site: the architecture of the machine Snakemake runs on
HOST_ARCH_ENV = "FORGETTING_HOST_ARCH"


def route_of(study: Study) -> str | None:
    return study.cluster.route


def host_arch() -> str:
    """The architecture Snakemake's own Python and conda environments are built for, in
    swebench's names (``x86_64``, ``arm64``); ``$FORGETTING_HOST_ARCH`` stands in for it
    when a site is rehearsed from another machine."""
    forced = os.environ.get(HOST_ARCH_ENV)
    if forced:
        if forced not in ARCHITECTURES:
            raise UserError(f"{HOST_ARCH_ENV}={forced!r}: expected one of {', '.join(ARCHITECTURES)}")
        return forced
    return host_architecture()


def check_route(study: Study) -> None:
    """The route's own consistency with the config (no profile needed): the backend and the
    instance images' architecture it implies, stated explicitly."""
    route = route_of(study)
    if route is None:
        return
    backend = study.model.backend
    if route == "C" and backend != "endpoint":
        raise UserError(f"cluster.route: C serves the model from a job of its own: model.backend must be "
                        f"'endpoint' (config/route-c.yaml), not {backend!r}")
    if route in ("A", "B") and backend == "endpoint":
        raise UserError(f"cluster.route: {route} starts vLLM in each batch job: model.backend 'endpoint' is "
                        f"route C's")
    configured = study.evaluation.images.configured_architecture
    if configured != IMAGE_ARCH[route]:
        raise UserError(
            f"evaluation.instance_images.architecture: route {route} runs {IMAGE_ARCH[route]} instance "
            f"images; set it explicitly to {IMAGE_ARCH[route]!r} (it is {configured or 'unset: the host'!s})")


def raw_resource(value: object) -> object:
    """A profile resource's value as written: Snakemake keeps string resources as
    ``Resource`` objects evaluated per job, their text in ``raw`` (snakemake/resources.py)."""
    return getattr(value, "raw", value)


def profile_resource(overwrite: Mapping[str, Mapping[str, object]], default: Mapping[str, object] | None,
                     rule: str, name: str) -> object | None:
    """Resource ``name`` of ``rule`` as the profile sets it: ``set-resources`` over
    ``default-resources`` (Snakemake's order, snakemake/workflow.py, where a rule's
    resources are initialised; the workflow's own rules never set ``partition_arch``)."""
    per_rule = overwrite.get(rule) or {}
    if name in per_rule:
        return raw_resource(per_rule[name])
    if default is not None and name in default:
        return raw_resource(default[name])
    return None


@dataclass(frozen=True)
class Placement:
    """A rule this config uses, and what it reads: ``arch`` is its partition's (None: the
    profile does not say), ``local`` that it runs where Snakemake runs."""

    rule: str
    arch: str | None
    local: bool = False


def placement_problems(study: Study, placements: Mapping[str, Placement], host: str, *, batch_rule: str,
                       images_built_by: Mapping[str, str], batch_images: Iterable[str],
                       evaluation_reads_instances: bool) -> list[str]:
    """Each way the route, the profile's partitions and Snakemake's host disagree, one line
    each; empty when every job runs where its code, environment and images can run.

    ``images_built_by`` maps each image name the batch jobs read (``trae-agent``, ``vllm``…)
    to the rule that builds it; ``batch_images`` names them."""
    route = route_of(study)
    problems = []

    def where(rule: str) -> str | None:
        p = placements.get(rule)
        if p is None:
            return None
        return host if p.local else p.arch

    for p in placements.values():
        arch = where(p.rule)
        if arch is not None and arch not in ARCHITECTURES:
            problems.append(f"{p.rule}: partition_arch {arch!r} is not one of {', '.join(ARCHITECTURES)}")
        elif arch is not None and arch != host:
            problems.append(
                f"{p.rule}: its partition is {arch} but Snakemake runs on {host}: the job's Python and "
                f"conda environment are built where Snakemake runs and cannot execute there")
    if route is None:
        return problems
    images = IMAGE_ARCH[route]
    readers = [batch_rule] + (["evaluate_batch"] if evaluation_reads_instances else [])
    for rule in readers:
        arch = where(rule)
        if arch is None or arch == images:
            continue
        if route == "B" and images == "x86_64" and arch == "arm64":
            continue  # route B: the GPU nodes run x86_64 images through qemu-user (docs/cluster.md)
        problems.append(f"{rule}: route {route} runs {images} instance images, but its partition is {arch}")
    batch_arch = where(batch_rule)
    for image in batch_images:
        builder = images_built_by.get(image)
        built = where(builder) if builder else None
        if batch_arch is not None and built is not None and built != batch_arch:
            problems.append(f"{image}.sif: built by {builder} for {built}, but {batch_rule} runs it on {batch_arch}")
    return problems


def placeholder_values(values: Iterable[object]) -> list[str]:
    """The site values still left at the profile's ``CHANGE-ME`` placeholders."""
    return sorted({str(v) for v in values if isinstance(v, str) and v.startswith("CHANGE-ME")})
