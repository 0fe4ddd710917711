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


def run_batch_resources():
    """runtime for every backend; a GPU only where the model is served by vLLM (the cluster
    profile maps gpu to the Slurm request; the demo stays on the local machine)."""
    execution = PLAN.study.section("execution")
    resources = {"runtime": int(execution.get("batch_runtime_min", 720))}
    if PLAN.study.section("model").get("backend") == "vllm":
        resources["gpu"] = 1
    return resources
