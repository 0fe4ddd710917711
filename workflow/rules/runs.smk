# Agent runs: one job per batch of runs of one agent and one configuration. On the cluster the
# job holds a GPU, serves the model once and runs the batch's runs against it concurrently.


rule run_batch:
    input:
        images=run_images,
    output:
        manifest=f"{BATCH_DIR}/runs.json",
    log:
        f"{RESULTS}/logs/runs/{{agent}}/{{configuration}}/{{batch}}.log",
    resources:
        runtime=lambda wc: PLAN.study.section("execution").get("batch_runtime_min", 720),
    conda:
        "../../envs/agents.yaml"
    script:
        "../scripts/run_batch.py"
