# Per-batch analysis: tool-call labels and re-fetches (behaviour), prompt-prefix cost.


rule analyze_batch:
    input:
        analyze_input,
    output:
        summary=f"{BATCH_DIR}/summary.parquet",
        calls=f"{BATCH_DIR}/calls.parquet",
        tool_calls=f"{BATCH_DIR}/tool_calls.parquet",
        run_costs=f"{BATCH_DIR}/run_costs.parquet",
        timings=f"{BATCH_DIR}/timings.parquet",
    params:
        pricing=pricing_settings(),
    log:
        f"{RESULTS}/logs/analyze/{{agent}}/{{configuration}}/{{batch}}.log",
    group:
        "post"
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/analyze_batch.py"
