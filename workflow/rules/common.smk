# Target lists and input functions shared by the stage rule files.

import os
from pathlib import Path

from forgetting.cluster.containers import (
    ContainerSettings,
    agents_partition,
    images_by_partition,
    images_for_evaluation,
    images_for_runs,
    instance_image_dir,
    server_images,
    study_images,
)

from forgetting.cluster.route import host_arch
from forgetting.cluster.preflight import partitions_of, target_key
from forgetting.cluster.preflight.gold import gold_applies
from snakemake_interface_executor_plugins.settings import ExecMode

BATCH_DIR = f"{RESULTS}/batches/{{agent}}/{{configuration}}/{{batch}}"
PREFLIGHT_DIR = f"{RESULTS}/preflight"
PREFLIGHT_KEY = target_key(PLAN.study)
PREFLIGHT_PARTITIONS = partitions_of(PLAN.study)
# the partition of the batch jobs: the GPU one beside their vLLM, the CPU one beside an endpoint
AGENTS_PARTITION = agents_partition(PLAN.study)
# the images each partition builds: where their code runs (the agents' where the batch jobs run)
GPU_IMAGES = images_by_partition(PLAN.study)["gpu"]
CPU_IMAGES = images_by_partition(PLAN.study)["cpu"]
IMAGE_TARGETS = study_images(PLAN.study)


def _profile_value(rule, name):
    from forgetting.cluster.route import profile_resource

    settings = workflow.resource_settings
    return profile_resource(settings.overwrite_resources, settings.default_resources, rule, name)


def gpu_side_by_hand():
    """Route C with a GPU partition of another architecture than Snakemake's machine: no
    Snakemake job can run there (each runs Snakemake's own Python and a conda environment
    built here), so the server's image, its preflight and the server itself are started by
    hand from an environment of the GPU nodes' architecture (docs/cluster.md, route C)."""
    from forgetting.cluster.route import host_arch, route_of

    if AGENTS_PARTITION != "cpu" or route_of(PLAN.study) != "C" or workflow.exec_mode != ExecMode.DEFAULT:
        return False
    gpu = _profile_value("preflight_gpu", "partition_arch")
    return gpu is not None and str(gpu) != host_arch()


if gpu_side_by_hand():
    print(f"route C: the GPU partition is {_profile_value('preflight_gpu', 'partition_arch')}, this machine "
          f"{host_arch()}: build vllm.sif, run the GPU preflight and the server by hand there (docs/cluster.md, "
          f"route C); Snakemake submits the CPU partition's jobs only", file=sys.stderr, flush=True)
    PREFLIGHT_PARTITIONS = [p for p in PREFLIGHT_PARTITIONS if p != "gpu"]
    IMAGE_TARGETS = [p for p in IMAGE_TARGETS if p not in set(server_images(PLAN.study))]
    GPU_IMAGES = ()


BATCH_ANALYSIS = ["summary", "calls", "tool_calls", "run_costs", "timings"]


def final_targets():
    """A narrowed study (--config only=…) stops at its batches' analysis; the whole study
    goes on to datasets, statistics, tables and figures.

    Every output of every stage is a target, not only the last ones: Snakemake removes the
    outputs of a job it interrupts (a forced run_batch's runs.json, an evaluation's eval.json),
    and a missing file that is only an *input* of jobs whose outputs exist reruns nothing
    ("Nothing to be done" over tables of runs that were redone since). As a target, the missing
    output is made again, and every job after it reruns (its input is new). Regeneration makes
    no runs.json or eval.json (no agent or evaluation job): they are no targets then."""
    batch = [] if PLAN.regenerate else PLAN.batch_files(f"{BATCH_DIR}/runs.json") + PLAN.batch_files(
        f"{BATCH_DIR}/eval.json")
    batch += [path for name in BATCH_ANALYSIS for path in PLAN.batch_files(f"{BATCH_DIR}/{name}.parquet")]
    if PLAN.is_subset:
        return batch
    datasets = expand(f"{RESULTS}/datasets/{{name}}.parquet", name=DATASETS)
    return [f"{RESULTS}/plan/runs.parquet", *batch, *datasets, *ANALYSIS_TARGETS]


def stats_settings(stage):
    """The statistics settings a stage computes with, as one string (a Snakemake param: a
    changed setting reruns the stage)."""
    import json

    settings = PLAN.study.statistics
    values = settings.computed_with() if stage == "stats" else settings.tables_with()
    return json.dumps(values, sort_keys=True)


def pricing_settings():
    """The pricing section the analysis costs with (profiles, primary, prompt_tolerance), as one
    string (a Snakemake param: a changed setting reruns the analysis and what follows)."""
    import json

    return json.dumps(PLAN.study.as_config()["pricing"], sort_keys=True)


def analyze_input(wildcards):
    """The batch's evaluation manifest. Regeneration works from the run directories on disk
    (no run or evaluation job): the manifest is read as it is (ancient) where it exists, so
    that the analysis keeps the same input and neither the regeneration nor the plain
    invocation after it reanalyses a batch whose analysis is current."""
    manifest = f"{BATCH_DIR}/eval.json".format(**wildcards)
    if PLAN.regenerate:
        return [ancient(manifest)] if os.path.exists(manifest) else []
    return manifest


def run_images(wildcards):
    """The SIFs a batch job reads (server, agent, SWE-bench instances); none for the demo.
    Ancient: a rebuilt or re-pulled image never reruns finished batches."""
    return [ancient(p) for p in images_for_runs(PLAN.study, wildcards.agent)]


def evaluation_images(wildcards):
    """The SWE-bench instance SIFs an evaluation job reads (apptainer backend only)."""
    return [ancient(p) for p in images_for_evaluation(PLAN.study)]


def run_batch_resources():
    """The time limit of each batch job, derived from its number of runs (forgetting.run.gpu_time:
    the worst case, at most execution.batch_runtime_limit_min); a GPU only where the model is
    served by vLLM (the cluster profile maps gpu to the Slurm request; the demo stays local)."""
    from forgetting.run.gpu_time import batch_runtime_min

    def runtime(wildcards):
        return batch_runtime_min(PLAN.study, len(PLAN.batch(wildcards.agent, wildcards.configuration, wildcards.batch).runs))

    resources = {"runtime": runtime}
    if PLAN.study.model.backend == "vllm":
        resources["gpu"] = 1
    if AGENTS_PARTITION == "cpu":  # route C: its runs in flight on the one server (endpoint_runs_problems)
        resources["endpoint_runs"] = int(PLAN.study.plan.concurrency)
    return resources


def preflight_output(partition):
    """The preflight output a job of ``partition`` waits for (none where the study does not
    use the partition, or in regenerate mode)."""
    if partition not in PREFLIGHT_PARTITIONS or PLAN.regenerate:
        return []
    return [ancient(f"{PREFLIGHT_DIR}/{partition}-{PREFLIGHT_KEY}.txt")]


def gold_output():
    """The gold-patch check every batch and evaluation job waits for, on every route, where the
    study evaluates in the instance images (forgetting.cluster.preflight.gold; none in regenerate mode)."""
    if not gold_applies(PLAN.study) or PLAN.regenerate:
        return []
    return [ancient(f"{PREFLIGHT_DIR}/gold-{PREFLIGHT_KEY}.txt")]


def batch_images():
    return {ancient(p) for agent in PLAN.study.agents for p in images_for_runs(PLAN.study, agent)}


def preflight_gpu_images(wildcards):
    """The images the GPU partition's preflight reads: every batch job's where they run there,
    and route C's server job's."""
    batches = batch_images() if AGENTS_PARTITION == "gpu" else set()
    return sorted(batches | {ancient(p) for p in server_images(PLAN.study)})


def preflight_cpu_images(wildcards):
    """The images the CPU partition's preflight reads: the evaluation's, and every batch job's
    where they run there (route C)."""
    batches = batch_images() if AGENTS_PARTITION == "cpu" else set()
    return sorted(batches | set(evaluation_images(wildcards)))


# ── The cluster route against the profile's partitions (forgetting.cluster.route) ──────────
BATCH_RULE = "run_batch" if AGENTS_PARTITION == "gpu" else "run_batch_endpoint"


def cluster_placements():
    """The submitted rules this config uses, each with its partition's architecture as the
    profile gives it (``partition_arch``; None where the profile does not say)."""
    from forgetting.cluster.route import Placement
    from forgetting.cluster.containers import runs_on_cluster_path

    used = [BATCH_RULE, "analyze_batch", "collect", "stats", "tables", "figures"]
    if PLAN.study.evaluation.backend == "apptainer":
        used.append("evaluate_batch")
    images = {Path(p).stem for p in IMAGE_TARGETS}
    if images & set(GPU_IMAGES):
        used.append("build_gpu_image")
    if images & set(CPU_IMAGES):
        used.append("build_cpu_image")
    if any("/.pulled/" in p for p in IMAGE_TARGETS):
        used.append("pull_swebench_images")
    used += [f"preflight_{p}" for p in PREFLIGHT_PARTITIONS]
    local = {"build_gpu_image", "build_cpu_image", "pull_swebench_images"} if CONTAINERS.on_login_node else set()
    out = {}
    for name in used:
        arch = _profile_value(name, "partition_arch")
        out[name] = Placement(name, None if arch is None else str(arch), local=name in local)
    return out


def exec_mode_is_default():
    return workflow.exec_mode == ExecMode.DEFAULT


def check_cluster_placement():
    """Before any job: every job this config submits runs where its Python, environment and
    images can run (route, profile partitions, Snakemake's host), and the route-C cap on runs
    in flight is given. Each problem is printed here (a dry run shows them); the run stops at
    Snakemake's onstart, before the first submission."""
    from forgetting.cluster.route import check_route, host_arch, placeholder_values, placement_problems
    from forgetting.foundation.errors import UserError

    try:
        check_route(PLAN.study)
        host = host_arch()
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    placements = cluster_placements()
    built_by = {i: "build_gpu_image" for i in GPU_IMAGES} | {i: "build_cpu_image" for i in CPU_IMAGES}
    read = sorted({Path(p).stem for agent in PLAN.study.agents for p in images_for_runs(PLAN.study, agent)
                   if p.endswith(".sif")})
    problems = placement_problems(
        PLAN.study, placements, host, batch_rule=BATCH_RULE, images_built_by=built_by, batch_images=read,
        evaluation_reads_instances="evaluate_batch" in placements)
    problems += endpoint_runs_problems()
    site = [_profile_value(r, k) for r in placements for k in ("slurm_partition", "slurm_account")]
    for value in placeholder_values(site):
        print(f"warning: the profile's site value {value!r} is still a placeholder: set the x-site block of "
              f"profiles/slurm/config.yaml (docs/cluster.md, Site setup)", file=sys.stderr, flush=True)
    for line in problems:
        print(f"warning: {line}", file=sys.stderr, flush=True)
    return problems


def stop_on_placement_problems(problems):
    """Snakemake's onstart (never in a dry run): the problems stop the run before any job."""
    if problems:
        print(f"error: {len(problems)} placement problem(s) above: no job submitted; fix cluster.route or the "
              f"profile's partitions (docs/cluster.md, Architecture)", file=sys.stderr, flush=True)
        raise SystemExit(2)


def endpoint_runs_problems():
    """Route C: the runs in flight of all batch jobs together must fit the one server's KV
    cache (model.endpoint.runs_in_flight), through Snakemake's global resource endpoint_runs."""
    cap = PLAN.study.model.endpoint_runs_in_flight
    if BATCH_RULE != "run_batch_endpoint" or cap is None:
        return []
    concurrency = int(PLAN.study.plan.concurrency)
    given = workflow.global_resources.get("endpoint_runs")
    given = getattr(given, "raw", given)
    if concurrency > cap:
        return [f"execution.concurrency {concurrency} is more than model.endpoint.runs_in_flight {cap}: one batch "
                f"job alone would overfill the server's KV cache"]
    if given is None or int(given) > cap:
        return [f"model.endpoint.runs_in_flight is {cap}: pass --resources endpoint_runs={cap} (each batch job "
                f"takes execution.concurrency = {concurrency}); "
                + ("none given" if given is None else f"{given} given")]
    return []
