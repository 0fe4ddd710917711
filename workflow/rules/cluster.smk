# Apptainer images of the cluster path (docs/cluster.md): the SIFs built once from
# containers/*.def into containers.image_dir, and SWE-bench's instance images pulled as SIF
# into evaluation.image_dir, a chunk of tasks per job. They enter the DAG only as inputs of
# run_batch (model.backend vllm) and evaluate_batch (evaluation.backend apptainer), marked
# ancient: a rebuilt or re-pulled image never reruns finished batches. The demo has none.

CONTAINERS = PLAN.study.cluster.containers
SIF_DIR = instance_image_dir(PLAN.study)


rule images:
    """Every image the study needs, built and pulled ahead of the batch jobs."""
    input:
        IMAGE_TARGETS,
    localrule: True


# Two rules for one job, so that the profile puts each on the partition whose nodes run the
# image's code: Apptainer builds for the architecture of the machine it builds on, and the GPU
# nodes (aarch64 GH200) may differ from the CPU partition's. `forgetting preflight` reads each
# SIF's architecture from its header and compares it with the node's.
rule build_gpu_image:
    input:
        definition="containers/{image}.def",
    output:
        f"{CONTAINERS.image_dir}/{{image}}.sif",
    log:
        f"{RESULTS}/logs/containers/build-{{image}}.log",
    wildcard_constraints:
        image="|".join(GPU_IMAGES) or "(?!)",  # none: a constraint no name matches
    localrule: CONTAINERS.on_login_node
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/build_image.py"


rule build_cpu_image:
    input:
        definition="containers/{image}.def",
    output:
        f"{CONTAINERS.image_dir}/{{image}}.sif",
    log:
        f"{RESULTS}/logs/containers/build-{{image}}.log",
    wildcard_constraints:
        image="|".join(CPU_IMAGES),
    localrule: CONTAINERS.on_login_node
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/build_image.py"


rule pull_swebench_images:
    output:
        f"{SIF_DIR}/.pulled/{{chunk}}.json",
    log:
        f"{RESULTS}/logs/containers/pull-{{chunk}}.log",
    wildcard_constraints:
        chunk=r"c\d{3}-[0-9a-f]{8}",
    localrule: CONTAINERS.on_login_node
    conda:
        "../../envs/evaluation.yaml"
    script:
        "../scripts/pull_images.py"


# The site's preflight (forgetting preflight, docs/cluster.md "First launch"): the node checks of
# each partition the study uses, as one small job on that partition, before any job that needs
# them. run_batch depends on its agents' partition's (the GPU one beside vLLM, the CPU one beside
# an endpoint: route C), evaluate_batch (apptainer backend) on the CPU partition's. A job writes its output only when every check passed, so a FAIL stops the study
# before its first batch and names what to do (the job's log has one line per check). The
# output's name hashes the settings the checks read: a changed setting gets a new preflight.
# The demo uses no partition and has no preflight job.
rule preflight:
    """Every partition's preflight (snakemake --profile profiles/slurm preflight)."""
    input:
        [f"{PREFLIGHT_DIR}/{p}-{PREFLIGHT_KEY}.txt" for p in PREFLIGHT_PARTITIONS],
        gold_output(),
    localrule: True


rule preflight_gpu:
    input:
        images=preflight_gpu_images,
    output:
        f"{PREFLIGHT_DIR}/gpu-{{key}}.txt",
    log:
        f"{RESULTS}/logs/preflight/gpu-{{key}}.log",
    wildcard_constraints:
        key="[0-9a-f]{8}",
    params:
        partition="gpu",
    resources:
        gpu=1,
    conda:
        "../../envs/agents.yaml"
    script:
        "../scripts/preflight.py"


rule preflight_cpu:
    input:
        images=preflight_cpu_images,
    output:
        f"{PREFLIGHT_DIR}/cpu-{{key}}.txt",
    log:
        f"{RESULTS}/logs/preflight/cpu-{{key}}.log",
    wildcard_constraints:
        key="[0-9a-f]{8}",
    params:
        partition="cpu",
    conda:
        "../../envs/evaluation.yaml"
    script:
        "../scripts/preflight.py"


# Every task's gold patch must resolve in its instance image and the unfixed repository must
# not, before any batch job, on every route (forgetting.cluster.preflight.gold): the CPU partition's
# preflight first, then 2 evaluations per task, evaluation.workers at a time.
rule preflight_gold:
    input:
        images=evaluation_images,
        preflight=preflight_output("cpu"),
    output:
        f"{PREFLIGHT_DIR}/gold-{{key}}.txt",
    log:
        f"{RESULTS}/logs/preflight/gold-{{key}}.log",
    wildcard_constraints:
        key="[0-9a-f]{8}",
    threads: PLAN.study.evaluation.workers
    conda:
        "../../envs/evaluation.yaml"
    script:
        "../scripts/preflight_gold.py"
