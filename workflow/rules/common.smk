# Target lists and input functions shared by the stage rule files.

import os

from forgetting.containers import (
    ContainerSettings,
    agents_partition,
    images_by_partition,
    images_for_evaluation,
    images_for_runs,
    instance_image_dir,
    server_images,
    study_images,
)

from forgetting.preflight import partitions_of, target_key
from forgetting.preflight.gold import gold_applies

BATCH_DIR = f"{RESULTS}/batches/{{agent}}/{{configuration}}/{{batch}}"
PREFLIGHT_DIR = f"{RESULTS}/preflight"
PREFLIGHT_KEY = target_key(PLAN.study)
PREFLIGHT_PARTITIONS = partitions_of(PLAN.study)
# the partition of the batch jobs: the GPU one beside their vLLM, the CPU one beside an endpoint
AGENTS_PARTITION = agents_partition(PLAN.study)
# the images each partition builds: where their code runs (the agents' where the batch jobs run)
GPU_IMAGES = images_by_partition(PLAN.study)["gpu"]
CPU_IMAGES = images_by_partition(PLAN.study)["cpu"]


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

    from forgetting.stats.settings import settings_of

    settings = settings_of(PLAN.study)
    values = settings.computed_with() if stage == "stats" else settings.tables_with()
    return json.dumps(values, sort_keys=True)


def pricing_settings():
    """The pricing section the analysis costs with (profiles, primary, prompt_tolerance), as one
    string (a Snakemake param: a changed setting reruns the analysis and what follows)."""
    import json

    return json.dumps(PLAN.study.section("pricing"), sort_keys=True)


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
    """The time limit of each batch job, derived from its number of runs (forgetting.gpu_time:
    the worst case, at most execution.batch_runtime_limit_min); a GPU only where the model is
    served by vLLM (the cluster profile maps gpu to the Slurm request; the demo stays local)."""
    from forgetting.gpu_time import batch_runtime_min

    def runtime(wildcards):
        return batch_runtime_min(PLAN.study, len(PLAN.batch(wildcards.agent, wildcards.configuration, wildcards.batch).runs))

    resources = {"runtime": runtime}
    if PLAN.study.section("model")["backend"] == "vllm":
        resources["gpu"] = 1
    return resources


def preflight_output(partition):
    """The preflight output a job of ``partition`` waits for (none where the study does not
    use the partition, or in regenerate mode)."""
    if partition not in PREFLIGHT_PARTITIONS or PLAN.regenerate:
        return []
    return [ancient(f"{PREFLIGHT_DIR}/{partition}-{PREFLIGHT_KEY}.txt")]


def gold_output():
    """The gold-patch check every batch and evaluation job waits for, on every route, where the
    study evaluates in the instance images (forgetting.preflight.gold; none in regenerate mode)."""
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
