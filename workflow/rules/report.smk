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


# Paired bootstrap statistics, the paper's tables and the figures, all flagged for the
# Snakemake HTML report:  snakemake --report results/report.html
# They read only the collected datasets, so `--config regenerate=true` rebuilds them without
# any agent, model or evaluation job (README: "Tables and figures from cached run outputs").
from forgetting.report.figures import FIGURE_FORMATS, FIGURES
from forgetting.report.stats.schemas import STATS
from forgetting.report.tables import FORMATS as TABLE_FORMATS
from forgetting.report.tables import TABLES


report: "../report/workflow.rst"


STATS_FILES = {name: f"{RESULTS}/stats/{name}.parquet" for name in STATS}
TABLE_FILES = [f"{RESULTS}/tables/{t}.{fmt}" for t in TABLES for fmt in TABLE_FORMATS]
FIGURE_FILES = [f"{RESULTS}/figures/{f}.{fmt}" for f in FIGURES for fmt in FIGURE_FORMATS]
ANALYSIS_TARGETS = [*STATS_FILES.values(), *TABLE_FILES, *FIGURE_FILES]


rule stats:
    input:
        runs=f"{RESULTS}/datasets/runs.parquet",
        tool_calls=f"{RESULTS}/datasets/tool_calls.parquet",
        run_costs=f"{RESULTS}/datasets/run_costs.parquet",
    output:
        **STATS_FILES,
    params:
        # a changed statistics setting (or evaluation.on_error) reruns this job and what follows
        settings=stats_settings("stats"),
        # named in the command that redoes errored evaluations (evaluation.on_error: fail)
        configfiles=[str(p) for p in workflow.configfiles],
    log:
        f"{RESULTS}/logs/stats.log",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/stats.py"


rule tables:
    input:
        **STATS_FILES,
    output:
        **{
            f"{t}_{fmt}": report(
                f"{RESULTS}/tables/{t}.{fmt}",
                caption=f"../report/table_{t}.rst",
                category="Tables",
                subcategory=t.replace("_", " "),
                labels={"table": t, "format": fmt},
            )
            for t in TABLES
            for fmt in TABLE_FORMATS
        },
    params:
        settings=stats_settings("tables"),
    log:
        f"{RESULTS}/logs/tables.log",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/tables.py"


rule figures:
    input:
        **STATS_FILES,
    output:
        **{
            f"{f}_{fmt}": report(
                f"{RESULTS}/figures/{f}.{fmt}",
                caption=f"../report/figure_{f}.rst",
                category="Figures",
                subcategory=f.replace("_", " "),
                labels={"figure": f, "format": fmt},
            )
            for f in FIGURES
            for fmt in FIGURE_FORMATS
        },
    log:
        f"{RESULTS}/logs/figures.log",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/figures.py"


rule analysis:
    """Every table and figure. From the collected datasets alone, with no upstream job:
    snakemake analysis --allowed-rules stats tables figures analysis"""
    input:
        ANALYSIS_TARGETS,
    localrule: True
