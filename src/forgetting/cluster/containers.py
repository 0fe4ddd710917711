"""Apptainer images on the cluster: which ones a study needs, building them, pulling SWE-bench's.

Four definition files live in ``containers/`` (``vllm``, ``trae-agent``, ``mini-swe-agent``,
``evaluation``); ``build_image`` turns one into ``<containers.image_dir>/<name>.sif``. The
SWE-bench instance images are pulled as SIF files into ``evaluation.image_dir`` by
:func:`forgetting.evaluate.apptainer.pull_images`, in chunks of
``containers.pull_chunk_size`` tasks (one Snakemake job per chunk, not per image).

A study asks for images only where it runs on the cluster path:

* ``model.backend: vllm`` — a batch job needs ``model.vllm.apptainer_image`` (the server) and
  ``agent.<agent>.apptainer_image`` (the agent, where one is named), and, for SWE-bench tasks,
  the instance images (the agents' commands run in the task's environment);
* ``model.backend: endpoint`` — the same but the server's image (the server is not the
  batch's); with ``model.endpoint.address_file`` (route C of docs/cluster.md) the server job,
  ``forgetting serve``, needs ``model.vllm.apptainer_image``;
* ``evaluation.backend: apptainer`` — an evaluation job needs the instance images.

Each image is built on the partition whose nodes run its code (:func:`images_by_partition`):
the server's on the GPU partition, the evaluation's on the CPU one, the agents' where the batch
jobs run (:func:`agents_partition`: beside vLLM on the GPU partition, beside an endpoint on the
CPU one).

The demo (scripted model, local evaluation) needs none, so no image job enters its DAG.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forgetting.foundation.atomic import atomic_output, write_json
from forgetting.foundation.errors import ConfigError, ResourceError
from forgetting.foundation.seeds import text_hex
from forgetting.study.config import PROJECT_ROOT, Study
from forgetting.study.sections import ContainerSettings, expand_path

#: definition files, ``containers/<name>.def``
DEFINITIONS_DIR = PROJECT_ROOT / "containers"
IMAGE_NAMES = ("vllm", "mini-swe-agent", "trae-agent", "evaluation")
#: images whose code runs on the GPU nodes (the server, the agents beside vLLM): built on the GPU
#: partition, so they are of its architecture (Apptainer builds for the architecture it runs on)
GPU_IMAGES = ("vllm", "mini-swe-agent", "trae-agent")
#: images whose code runs on the CPU partition's nodes
CPU_IMAGES = ("evaluation",)
#: the agents' images (on the partition of the batch jobs)
AGENT_IMAGES = ("mini-swe-agent", "trae-agent")
#: where marker files of pulled chunks live, under ``evaluation.image_dir``
PULLED_DIR = ".pulled"


def instance_image_dir(study: Study) -> str:
    """``evaluation.image_dir`` as the workflow names it (relative paths stay relative)."""
    return expand_path(study.evaluation.image_dir_value, "evaluation.image_dir")


def uses_vllm(study: Study) -> bool:
    return study.model.backend == "vllm"


def serves_vllm(study: Study) -> bool:
    """The study's jobs serve the model with vLLM on the GPU partition: in its batch jobs
    (``vllm``), or as route C's server job (``endpoint`` with ``address_file``: what
    ``forgetting serve`` publishes; an endpoint at a ``base_url`` runs elsewhere)."""
    route_c = study.endpoint is not None and study.endpoint.address_file is not None
    return uses_vllm(study) or route_c


def agents_partition(study: Study) -> str:
    """The partition the batch jobs (the agents and their sandboxes) run on: the GPU one beside
    their vLLM, the CPU one beside an endpoint (route C of docs/cluster.md)."""
    return "cpu" if study.model.backend == "endpoint" else "gpu"


def images_by_partition(study: Study) -> dict[str, tuple[str, ...]]:
    """Which images each partition builds (``gpu``, ``cpu``): where their code runs."""
    if agents_partition(study) == "cpu":
        return {"gpu": tuple(i for i in GPU_IMAGES if i not in AGENT_IMAGES), "cpu": CPU_IMAGES + AGENT_IMAGES}
    return {"gpu": GPU_IMAGES, "cpu": CPU_IMAGES}


def server_images(study: Study) -> list[str]:
    """The SIF route C's server job (``forgetting serve``) reads: ``model.vllm.apptainer_image``."""
    server = study.model.server_image  # optional: vllm on the host
    if not server or uses_vllm(study) or not serves_vllm(study):
        return []
    return [expand_path(server, "model.vllm.apptainer_image")]


def runs_on_cluster_path(study: Study) -> bool:
    """The batches run real agents against a real model: vLLM started by the batch, or an
    endpoint (route C: the model on the GPU partition, the batches on a CPU partition)."""
    return study.model.backend in ("vllm", "endpoint")


def runs_need_instance_images(study: Study) -> bool:
    """The agents work inside the SWE-bench instance images (cluster path, real tasks)."""
    return runs_on_cluster_path(study) and study.dataset.kind == "swebench"


def evaluation_needs_instance_images(study: Study) -> bool:
    return study.evaluation.backend == "apptainer"


def run_images(study: Study, agent: str) -> list[str]:
    """The SIF files a batch job of ``agent`` reads: the model server's (vLLM only: an
    endpoint's server is not the batch's) and the agent's."""
    if not runs_on_cluster_path(study):
        return []
    out = []
    server = study.model.server_image  # optional: vllm on the host
    if server and uses_vllm(study):
        out.append(expand_path(server, "model.vllm.apptainer_image"))
    agent_image = study.agent.images.get(agent)  # optional
    if agent_image:
        out.append(expand_path(agent_image, f"agent.{agent}.apptainer_image"))
    return out


@dataclass(frozen=True)
class PullChunk:
    """A set of tasks whose instance images one job pulls; its name hashes its ids."""

    name: str
    ids: tuple[str, ...]


def pull_chunks(study: Study) -> list[PullChunk]:
    """The study's tasks (sorted) in chunks of ``containers.pull_chunk_size``.

    A chunk's name carries a hash of its ids, so a narrowed study (``only_tasks``) never
    reuses the marker of a chunk of the full study that holds other tasks.
    """
    size = study.cluster.containers.pull_chunk_size
    ids = sorted(study.tasks)
    chunks = []
    for index, start in enumerate(range(0, len(ids), size)):
        part = tuple(ids[start : start + size])
        digest = text_hex("\n".join(part))[:8]
        chunks.append(PullChunk(f"c{index:03d}-{digest}", part))
    return chunks


def pull_markers(study: Study) -> list[str]:
    """One marker file per chunk: ``<evaluation.image_dir>/.pulled/<chunk>.json``."""
    base = instance_image_dir(study)
    return [f"{base}/{PULLED_DIR}/{c.name}.json" for c in pull_chunks(study)]


def images_for_runs(study: Study, agent: str) -> list[str]:
    """Every image file a ``run_batch`` job of ``agent`` depends on (empty for the demo)."""
    out = run_images(study, agent)
    if runs_need_instance_images(study):
        out += pull_markers(study)
    return out


def images_for_evaluation(study: Study) -> list[str]:
    """Every image file an ``evaluate_batch`` job depends on (empty unless apptainer)."""
    return pull_markers(study) if evaluation_needs_instance_images(study) else []


def study_images(study: Study) -> list[str]:
    """Every image file any job of the study reads (the ``images`` target; route C's server
    job's too), sorted."""
    paths = {p for agent in study.agents for p in images_for_runs(study, agent)}
    return sorted(paths | set(images_for_evaluation(study)) | set(server_images(study)))


def pull_chunk(study: Study, chunk_name: str, marker: str | os.PathLike[str], *,
               log: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Pull the instance images of one chunk (those already there are kept) and write its marker.

    The marker lists each image's path and size; it is written atomically after the last pull,
    so a chunk interrupted half-way is pulled again (its finished images are reused).
    """
    from forgetting.evaluate.apptainer import pull_images  # swebench: a pull job's, not the Snakefile's

    chunks = {c.name: c for c in pull_chunks(study)}
    if chunk_name not in chunks:
        raise ConfigError(f"pull chunk {chunk_name!r} is not part of this study's plan")
    with contextlib.ExitStack() as stack:
        log_fh = stack.enter_context(open(log, "a", encoding="utf-8")) if log else None
        paths = pull_images(study, chunks[chunk_name].ids,
                            progress=(lambda line: print(line, file=log_fh, flush=True)) if log_fh else None)
    images = {i: {"sif": str(p), "bytes": p.stat().st_size} for i, p in zip(chunks[chunk_name].ids, paths, strict=True)}
    record = {"chunk": chunk_name, "images": images}
    write_json(marker, record)
    return record


def definition_path(name: str) -> Path:
    return DEFINITIONS_DIR / f"{name}.def"


def build_command(definition: str | os.PathLike[str], target: str | os.PathLike[str],
                  settings: ContainerSettings) -> list[str]:
    """``apptainer build [ARGS] TARGET DEFINITION``."""
    return [settings.executable, "build", *settings.build_args, str(target), str(definition)]


def build_image(definition: str | os.PathLike[str], target: str | os.PathLike[str],
                settings: ContainerSettings, *, log: str | os.PathLike[str] | None = None,
                cwd: str | os.PathLike[str] | None = None) -> Path:
    """Build ``definition`` into ``target``, through a temporary file renamed into place.

    Runs from ``cwd`` (default: the project root), because the definition files copy the
    package's source (``%files``) relative to it. A failed or interrupted build leaves nothing.
    """
    target = Path(target)
    log_path = Path(log) if log else target.with_suffix(".build.log")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output(target) as partial:
        command = build_command(Path(definition).resolve(), partial.resolve(), settings)
        try:
            with open(log_path, "w", encoding="utf-8") as fh:
                fh.write("$ " + " ".join(command) + "\n")
                fh.flush()
                proc = subprocess.run(command, cwd=cwd or PROJECT_ROOT, stdout=fh, stderr=subprocess.STDOUT,
                                      timeout=settings.build_timeout_s)
        except subprocess.TimeoutExpired:
            raise ResourceError(
                f"apptainer build {definition}: not done after {settings.build_timeout_s} s "
                f"(containers.build_timeout_s); see {log_path}"
            ) from None
        except FileNotFoundError:
            raise ResourceError(
                f"containers.executable: {settings.executable!r} not found on PATH; "
                "load or install Apptainer to build the images (docs/cluster.md)"
            ) from None
        if proc.returncode != 0 or not partial.is_file():
            raise ResourceError(f"apptainer build {definition} failed (exit {proc.returncode}); see {log_path}")
    return target



def check_paths(study: Study) -> None:
    """Resolve every image path of ``study`` now, so an unset ``$VARIABLE`` stops it before any job."""
    study.cluster.containers.image_dir  # noqa: B018 (an unset variable raises here)
    instance_image_dir(study)
    for agent in study.agents:
        run_images(study, agent)
