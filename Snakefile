# The study pipeline: plan -> runs -> evaluate -> analyze -> collect -> stats -> tables, figures, report.
# Rules stay thin: each calls one function of the `forgetting` package (src/forgetting).
#   snakemake --profile profiles/local                  the embedded demo on this machine
#   snakemake --profile profiles/slurm                  the paper's study on a Slurm cluster
#   snakemake ... --config only=delayed-turn-tool_output-50   one configuration only
#   snakemake ... --config regenerate=true              tables and figures from cached run outputs
import sys

from snakemake.utils import min_version, validate

# the package of this checkout, whatever else is installed: Snakemake's process imports it here,
# every job through workflow/scripts/_checkout.py (envs/*.yaml hold third-party packages only)
sys.path.insert(0, f"{workflow.basedir}/src")

from forgetting.workflow import hold_lock, job_shell_prefix, load
from snakemake_interface_executor_plugins.settings import ExecMode

min_version("9.0")

# the paper's study unless --configfile (or a profile) names another config
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


# our own check first: it names the bad key in one line and stops before any job
PLAN = load(
    config,
    workflow.basedir,
    source=", ".join(map(str, workflow.configfiles)) or "config",
    configfiles=workflow.configfiles,
    overrides=workflow.config_settings.config,
)
validate(config, "workflow/schemas/config.schema.yaml")
RESULTS = PLAN.results

# Ctrl-C held while a local job's Python starts (forgetting.workflow.job_shell_prefix; released in workflow/scripts/_checkout.py)
shell.prefix(job_shell_prefix(local=workflow.exec_mode == ExecMode.DEFAULT))

# one Snakemake at a time per study; a lock a killed one left is removed (forgetting.foundation.snakemake_lock)
if workflow.exec_mode == ExecMode.DEFAULT and not workflow.output_settings.dryrun:
    hold_lock(PLAN)

wildcard_constraints:
    agent="trae|mini|mini-text",
    configuration="[a-z0-9_.]+(-[a-z0-9_.]+)*",
    batch=r"b\d{3}-[0-9a-f]{8}",


include: "workflow/rules/common.smk"
include: "workflow/rules/cluster.smk"
include: "workflow/rules/study.smk"
# regeneration (--config regenerate=true) works from the run outputs on disk: without these
# rules no agent, model or evaluation job can be scheduled, whatever the files' times say
if not PLAN.regenerate:

    include: "workflow/rules/run.smk"
    include: "workflow/rules/evaluate.smk"


include: "workflow/rules/analyze.smk"
include: "workflow/rules/report.smk"


# the main process only (not a job re-reading this file on its node): the route, the profile's
# partitions and this machine agree before anything is submitted (forgetting.cluster.route)
PLACEMENT_PROBLEMS = check_cluster_placement() if exec_mode_is_default() else []


onstart:
    stop_on_placement_problems(PLACEMENT_PROBLEMS)


rule all:
    input:
        final_targets(),
    default_target: True
