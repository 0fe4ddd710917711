# SWE-bench evaluation of every run of a batch (docker, apptainer or local backend).


rule evaluate_batch:
    input:
        manifest=f"{BATCH_DIR}/runs.json",
        images=evaluation_images,
        preflight=preflight_output("cpu"),
        gold=gold_output(),
    output:
        manifest=f"{BATCH_DIR}/eval.json",
    log:
        f"{RESULTS}/logs/evaluate/{{agent}}/{{configuration}}/{{batch}}.log",
    threads: PLAN.study.evaluation.workers
    group:
        "post"
    conda:
        "../../envs/evaluation.yaml"
    script:
        "../scripts/evaluate_batch.py"
