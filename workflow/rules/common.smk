# Target lists shared by the stage rule files.

BATCH_DIR = f"{RESULTS}/batches/{{agent}}/{{configuration}}/{{batch}}"


def final_targets():
    """A narrowed study (--config only=…) stops at its batches' analysis; the whole study
    goes on to datasets, statistics, tables and figures."""
    if PLAN.is_subset:
        return PLAN.batch_files(f"{BATCH_DIR}/summary.parquet")
    return [f"{RESULTS}/plan/runs.parquet", *ANALYSIS_TARGETS]


def analyze_input(wildcards):
    # regenerate mode works from the run directories already on disk: no run or evaluation job
    if PLAN.regenerate:
        return []
    return f"{BATCH_DIR}/eval.json".format(**wildcards)
