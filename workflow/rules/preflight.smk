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
    threads: int(PLAN.study.section("evaluation")["workers"])
    conda:
        "../../envs/evaluation.yaml"
    script:
        "../scripts/preflight_gold.py"
