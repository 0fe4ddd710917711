# Agent runs: one job per batch of runs of one agent and one configuration (execution.batch_size).
# The job starts ONE model server (vLLM on a GPU node; the scripted stand-in for the demo),
# runs the batch's unfinished runs against it, execution.concurrency at a time, each behind
# its own deletion proxy, and stops the server (forgetting.run, docs/runs.md). Finished
# runs are kept; a job that fails names its unfinished runs, and a retry redoes only those.
#
# Beside an endpoint (model.backend: endpoint; the cluster's route C) the same job is the rule
# run_batch_endpoint: a rule of its own, so the profile's set-resources give it the CPU
# partition while run_batch keeps the GPU one — no --set-resources on the command line, which
# would replace the profile's whole set-resources key (docs/cluster.md, route C). Both rules
# write the same files; the ruleorder picks the route's.

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


rule run_batch_endpoint:
    input:
        images=run_images,
        preflight=preflight_output(AGENTS_PARTITION),
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


if BATCH_RULE == "run_batch":

    ruleorder: run_batch > run_batch_endpoint

else:

    ruleorder: run_batch_endpoint > run_batch
