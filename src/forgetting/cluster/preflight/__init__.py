"""``forgetting preflight``: is this site ready for the study? One line per check, OK or FAIL
with what to do, before any batch job is submitted.

The checks of a node (:mod:`forgetting.cluster.preflight.checks`) depend on the partition its jobs run
on — the study uses the GPU partition where vLLM serves the model (``model.backend: vllm``, in
the batch jobs; or route C's server job, ``model.backend: endpoint`` with an ``address_file``)
and the CPU partition where ``evaluation.backend`` is ``apptainer`` (the evaluation jobs) or the
agents run beside an endpoint (the batch jobs of ``model.backend: endpoint``,
:func:`agents_partition`):

* the model server's (GPU): Apptainer; the server's image (its SIF header's architecture
  against this host's); the job's GPU inside it (``--nv``); the GPU's memory against the
  KV-cache budget of the model's ``config.json`` (:mod:`forgetting.run.vllm_memory`) and the prefix
  cache against ``execution.concurrency``;
* the agents' (GPU beside vLLM, CPU beside an endpoint): the agent's image; the instance images
  the agents work in; room for the sandboxes on ``execution.scratch_dir``; ``trae-cli --help``
  inside its image;
* the evaluation's (CPU): Apptainer; the instance images the evaluation runs;
* every partition's: the conda environments' architecture.

``--serve`` starts the model server from its image and asks ``/v1/models`` and ``/tokenize``
(:mod:`forgetting.cluster.preflight.serve`); ``--first-step`` runs each agent for one model call
through the batch code, with a run's own command line (:mod:`forgetting.cluster.preflight.first_step`);
``--smoke`` takes one baseline task per agent through run, evaluation and analysis
(:mod:`forgetting.cluster.preflight.smoke`). The workflow's ``preflight`` target runs the node
checks as one small job per partition (``workflow/rules/cluster.smk``), and in the GPU partition's,
where the agents run beside vLLM, each agent's first step after them
(``cluster.preflight_first_step``, :func:`runs_first_step`); the batch jobs depend on the agents'
partition's, the evaluation jobs on the CPU one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from forgetting.cluster.containers import (
    agents_partition,
    expand_path,
    run_images,
    runs_need_instance_images,
    serves_vllm,
)
from forgetting.cluster.preflight import checks as c
from forgetting.cluster.preflight.checks import BINFMT_DIR, GIB, Check, check_conda_envs, last_line
from forgetting.foundation.atomic import write_text
from forgetting.foundation.errors import UserError
from forgetting.foundation.seeds import text_hex
from forgetting.run.counting import counting_for, counting_line
from forgetting.run.vllm_memory import (
    ModelShape,
    budget_for,
    find_model_dir,
    kv_budget_line,
    prefix_cache_line,
    weights_bytes,
)
from forgetting.study.config import Study

PARTITIONS: tuple[str, ...] = ("gpu", "cpu")
BUILD_HINT = "build it with `snakemake --profile profiles/slurm images`"


class PreflightFailed(UserError):
    """At least one check failed; the message names how many, the log has the lines."""

    exit_code = 1


def partitions_of(study: Study) -> list[str]:
    """The partitions whose jobs need the cluster's software (the demo: none)."""
    out = []
    if serves_vllm(study):
        out.append("gpu")
    if study.evaluation.backend == "apptainer" or agents_need_cpu_partition(study):
        out.append("cpu")
    return out


def agents_need_cpu_partition(study: Study) -> bool:
    """The batch jobs run the cluster's agents on the CPU partition: beside an endpoint, in the
    instance images or an agent's image (the demo's agents, beside any endpoint, need nothing)."""
    images = runs_need_instance_images(study) or any(run_images(study, a) for a in study.agents)
    return agents_partition(study) == "cpu" and images


def target_key(study: Study) -> str:
    """A hash of what the node checks depend on: a changed setting gets a fresh preflight job."""

    keys = ("model", "agent", "execution", "evaluation", "containers", "dataset")
    config = study.as_config()
    data = {k: config.get(k) for k in keys} | {"tasks": sorted(study.tasks), "agents": list(study.agents)}
    if study.cluster.preflight_first_step:  # the GPU job's first step (runs_first_step)
        data["first_step"] = True
    return text_hex(json.dumps(data, sort_keys=True, default=str))[:8]


def _image(study: Study, value: str | None, key: str) -> Path | None:
    return study.path(expand_path(value, key)) if value else None


def gpu_checks(study: Study, environ: Mapping[str, str], binfmt_dir: Path) -> list[Check]:
    """The GPU partition's: the model server's, and the agents' where they run beside it."""
    beside = agents_partition(study) == "gpu"
    return model_server_checks(study, environ, binfmt_dir, agents_beside=beside)


def prompt_count_check(study: Study) -> Check:
    """How the runs' proxies will count prompts (``model.tokenizer``): the served model's
    tokenizer and chat template found and loaded, as a batch loads them before its server starts."""
    try:
        counting = counting_for(study.model.section, study.root)
    except UserError as exc:
        return Check("prompt count", False, last_line(str(exc)))
    return Check("prompt count", True, counting_line(counting))


def model_server_checks(study: Study, environ: Mapping[str, str], binfmt_dir: Path, *,
                        agents_beside: bool) -> list[Check]:
    """vLLM's checks (``agents_beside``: with the agents', in the order a batch job meets them)."""

    model, vllm = study.model.section, study.model.vllm
    apptainer = str(vllm["apptainer"])
    cpu = vllm["device"] == "cpu"
    server = _image(study, vllm.get("apptainer_image"), "model.vllm.apptainer_image")
    agents = AgentChecks(study, apptainer, environ, binfmt_dir) if agents_beside else None
    # Apptainer only where something runs in an image; a GPU only where vLLM uses one
    out = [c.check_apptainer(apptainer)] if server or (agents and agents.need_apptainer()) else []
    if server:
        out.append(c.check_image("vllm", server, build_hint=BUILD_HINT, binfmt_dir=binfmt_dir))
    if agents:
        out += agents.images()
    gpu = None
    if cpu:
        out += c.check_vllm_cpu(str(vllm["python"]) if vllm.get("python") else None, server is not None,
                                dtype=str(vllm["dtype"]))
    else:
        if server:
            out.append(c.check_gpu_in_container(apptainer, server, environ))
        gpu, why = c.query_gpu(environ)
        out.append(Check("gpu memory", True,
                         f"GPU {gpu.index}: {gpu.name}, {gpu.total_bytes / GIB:.2f} GiB (nvidia-smi)")
                   if gpu else Check("gpu memory", False, f"nvidia-smi: {why}; run the preflight on a GPU node "
                                     "(`snakemake --profile profiles/slurm preflight`)"))
    model_dir, looked = find_model_dir(str(model["name"]), vllm.get("model_dir"), environ)
    if model_dir is None:
        out.append(Check("model", False, f"{model['name']}: no config.json in {', '.join(map(str, looked))}; download "
                         "the weights (docs/cluster.md, Site setup) or set model.vllm.model_dir"))
    else:
        try:

            shape, weights = ModelShape.from_config(model_dir / "config.json"), weights_bytes(model_dir)
            sizes = (f"{shape.layers} layers × {shape.kv_heads} KV heads × head_dim {shape.head_dim} ({shape.dtype}), "
                     f"{weights / GIB:.2f} GiB of weights")
            out.append(Check("model", True, f"{model['name']} at {model_dir}: {sizes}"))
        except UserError as exc:
            out.append(Check("model", False, str(exc)))
            model_dir = None
    if model_dir:
        out.append(prompt_count_check(study))
    if cpu and model_dir:
        budget = budget_for(study, int(float(vllm["cpu_kv_space_gib"]) * GIB), model_dir, cpu=True)
        ok, line = kv_budget_line(budget)
        out.append(Check("kv cache budget", ok, line))
        if ok:
            out.append(Check("prefix cache", *prefix_cache_line(budget)))
    if gpu and model_dir:
        budget = budget_for(study, gpu.total_bytes, model_dir)
        ok, line = kv_budget_line(budget)
        out.append(Check("kv cache budget", ok, line))
        if ok:
            out.append(Check("prefix cache", *prefix_cache_line(budget)))
    if agents:
        out += agents.sandboxes()
    return out


@dataclass
class AgentChecks:
    """The checks of the node the agents run on: their images, the instance images they work
    in, room for their sandboxes, ``trae-cli`` inside its image."""

    study: Study
    apptainer: str
    environ: Mapping[str, str]
    binfmt_dir: Path
    trae: Path | None = None
    sif_sizes: list[int] = field(default_factory=list)

    def need_apptainer(self) -> bool:
        """Whether the agents' checks run anything in an image."""
        study = self.study
        return runs_need_instance_images(study) or bool(
            "trae" in study.agents and study.agent.images.get("trae"))

    def images(self) -> list[Check]:
        study, out = self.study, []
        self.trae = _image(study, study.agent.images.get("trae"), "agent.trae.apptainer_image") \
            if "trae" in study.agents else None
        if self.trae:
            out.append(c.check_image("trae-agent", self.trae, build_hint=BUILD_HINT, binfmt_dir=self.binfmt_dir))
        evaluation = study.evaluation
        if runs_need_instance_images(study):
            out.append(c.check_instance_images(evaluation.image_dir, study.tasks, evaluation.images.goarch,
                                               binfmt_dir=self.binfmt_dir))
            self.sif_sizes = [p.stat().st_size for i in study.tasks
                              if (p := evaluation.image_dir / f"{i}.sif").is_file()]
        return out

    def sandboxes(self) -> list[Check]:
        study, out = self.study, []
        apptainer = study.evaluation.apptainer
        if self.need_apptainer():  # its cache and temp directories: only where the runs pull or run an image
            out += c.check_apptainer_dirs(apptainer.cache_dir, apptainer.tmp_dir, images=len(study.tasks),
                                          largest_sif=max(self.sif_sizes, default=c.NOMINAL_SIF_BYTES))
        mini = [a for a in study.agents if a in ("mini", "mini-text")]
        if mini and runs_need_instance_images(study):

            settings = study.runner
            out.append(c.check_scratch(settings.scratch_dir, settings.concurrency, self.sif_sizes))
        if self.trae:
            from forgetting.cluster.preflight.launch import check_trae_launch

            out.append(check_trae_launch(study, self.environ))
        return out


def cpu_checks(study: Study, environ: Mapping[str, str], binfmt_dir: Path) -> list[Check]:
    """The CPU partition's: the evaluation's, and the agents' where they run beside an endpoint."""

    evaluation = study.evaluation
    out = [
        c.check_apptainer(evaluation.apptainer.executable),
        c.check_instance_images(evaluation.image_dir, study.tasks, evaluation.images.goarch, binfmt_dir=binfmt_dir),
        *c.check_apptainer_dirs(evaluation.apptainer.cache_dir, evaluation.apptainer.tmp_dir,
                                images=len(study.tasks)),
    ]
    if agents_partition(study) == "cpu":
        agents = AgentChecks(study, evaluation.apptainer.executable, environ, binfmt_dir)
        out += [ch for ch in agents.images() + agents.sandboxes() if all(ch.name != seen.name for seen in out)]
    return out


def node_checks(study: Study, partitions: Sequence[str], *, environ: Mapping[str, str] | None = None,
                binfmt_dir: Path = BINFMT_DIR, conda_dir: Path | None = None) -> list[Check]:
    """The checks of this node for the jobs of ``partitions`` (a check two partitions share once)."""

    env = dict(os.environ) if environ is None else dict(environ)
    out: list[Check] = []
    for partition in partitions:
        found = gpu_checks(study, env, binfmt_dir) if partition == "gpu" else cpu_checks(study, env, binfmt_dir)
        out += [ch for ch in found if all(ch.name != seen.name for seen in out)]
    if partitions:
        out.append(check_conda_envs(conda_dir or study.root / ".snakemake" / "conda"))
    return out


def runs_first_step(study: Study, partition: str) -> bool:
    """Whether the preflight job of ``partition`` runs each agent's first step: the GPU partition's,
    where the agents run beside the model server (``model.backend: vllm``), with
    ``cluster.preflight_first_step``."""
    return (study.cluster.preflight_first_step and partition == "gpu" and agents_partition(study) == "gpu"
            and serves_vllm(study))


def run_in_job(study: Study, partition: str, *, out: str | os.PathLike[str], log: str | os.PathLike[str]) -> None:
    """The workflow's preflight job on one partition: the lines go to ``log``; ``out`` is written
    (atomically) only when every check passed, so a failed preflight stops the jobs after it.
    On the partition where the agents run beside the model server, with
    ``cluster.preflight_first_step``, each agent's first step follows the node checks when they
    passed (:mod:`forgetting.cluster.preflight.first_step`)."""

    Path(log).parent.mkdir(parents=True, exist_ok=True)
    checks = node_checks(study, [partition])
    text = "".join(ch.line() + "\n" for ch in checks)
    Path(log).write_text(text, encoding="utf-8")
    print(text, end="", flush=True)
    if runs_first_step(study, partition) and all(ch.ok for ch in checks):
        from forgetting.cluster.preflight.first_step import first_step_checks

        for ch in first_step_checks(study):
            checks.append(ch)
            text += ch.line() + "\n"
            print(ch.line(), flush=True)
        Path(log).write_text(text, encoding="utf-8")
    failed = [ch for ch in checks if not ch.ok]
    if failed:
        raise PreflightFailed(f"preflight on the {partition} partition: {len(failed)} of {len(checks)} checks failed "
                              f"({', '.join(ch.name for ch in failed)}); see {log}")
    write_text(out, text)
