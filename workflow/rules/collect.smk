# Every batch's analysis into the study's Parquet datasets (runs, calls, tool calls, run costs,
# timings). A planned run without readable output is named in the log, one line per run;
# statistics.missing_runs decides whether that stops collection (fail) or is kept as a
# `missing` row (mark). The datasets are flagged `update`: Snakemake keeps them while the job
# runs (it deletes a job's other outputs first) and restores them when it fails, and the job
# replaces them as a set once all new ones are complete, so the last good datasets survive a
# collection that stops on a bad run.

DATASETS = ["runs", "calls", "tool_calls", "run_costs", "timings"]


rule collect:
    input:
        [
            path
            for name in ("summary", "calls", "tool_calls", "run_costs")
            for path in PLAN.batch_files(f"{BATCH_DIR}/{name}.parquet")
        ],
    output:
        [update(path) for path in expand(f"{RESULTS}/datasets/{{name}}.parquet", name=DATASETS)],
    log:
        f"{RESULTS}/logs/collect.log",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/collect.py"
