# Apptainer images of the cluster path (docs/cluster.md): the SIFs built once from
# containers/*.def into containers.image_dir, and SWE-bench's instance images pulled as SIF
# into evaluation.image_dir, a chunk of tasks per job. They enter the DAG only as inputs of
# run_batch (model.backend vllm) and evaluate_batch (evaluation.backend apptainer), marked
# ancient: a rebuilt or re-pulled image never reruns finished batches. The demo has none.

CONTAINERS = ContainerSettings.from_study(PLAN.study)
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
