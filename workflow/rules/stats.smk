# Paired bootstrap statistics, the paper's tables and the figures.

ANALYSIS_TARGETS = [f"{RESULTS}/datasets/runs.parquet"]
