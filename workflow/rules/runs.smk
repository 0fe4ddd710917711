# Agent runs: one job per batch of runs of one agent and one configuration (execution.batch_size).
# The job starts ONE model server (vLLM on a GPU node; the scripted stand-in for the demo),
# runs the batch's unfinished runs against it, execution.concurrency at a time, each behind
# its own deletion proxy, and stops the server (forgetting.runner, docs/runs.md). Finished
# runs are kept; a job that fails names its unfinished runs, and a retry redoes only those.


rule run_batch:
    input:
        images=run_images,
        preflight=preflight_output(AGENTS_PARTITION),
        gold=gold_output(),
    output:
        manifest=f"{BATCH_DIR}/runs.json",
    log:
        f"{RESULTS}/logs/runs/{{agent}}/{{configuration}}/{{batch}}.log",
    resources:
        **run_batch_resources(),
    conda:
        "../../envs/agents.yaml"
    script:
        "../scripts/run_batch.py"
