# The run table of the study (results/plan/runs.parquet).


rule plan:
    output:
        f"{RESULTS}/plan/runs.parquet",
    log:
        f"{RESULTS}/logs/plan.log",
    localrule: True
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/plan.py"
