# Every batch's analysis into the study's Parquet datasets (runs, calls, tool calls).

DATASETS = ["runs", "calls", "tool_calls", "run_costs", "timings"]


rule collect:
    input:
        PLAN.batch_files(f"{BATCH_DIR}/summary.parquet"),
    output:
        expand(f"{RESULTS}/datasets/{{name}}.parquet", name=DATASETS),
    log:
        f"{RESULTS}/logs/collect.log",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/collect.py"
