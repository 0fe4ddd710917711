# Agent runs: one job per batch of runs of one agent and one configuration (execution.batch_size).
# The job starts ONE model server (vLLM on a GPU node; the scripted stand-in for the demo),
# runs the batch's unfinished runs against it, execution.concurrency at a time, each behind
# its own deletion proxy, and stops the server (forgetting.runner, docs/runs.md). Finished
# runs are kept; a job that fails names its unfinished runs, and a retry redoes only those.


def run_batch_resources():
    """runtime for every backend; a GPU only where the model is served by vLLM (the cluster
    profile maps gpu to the Slurm request; the demo stays on the local machine)."""
    execution = PLAN.study.section("execution")
    resources = {"runtime": int(execution.get("batch_runtime_min", 720))}
    if PLAN.study.section("model").get("backend") == "vllm":
        resources["gpu"] = 1
    return resources


rule run_batch:
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
