"""The ``stats`` stage: datasets → ``results/…/stats/{effects,comparisons,summary,cache_validation}.parquet``.

Reads only the collected datasets (``runs``, ``tool_calls``, ``run_costs``) and the study's
``statistics`` and ``pricing`` settings, so it regenerates without any run directory.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pyarrow as pa

from forgetting.evaluate.redo import config_files_of, redo_command
from forgetting.foundation.errors import RunOutputError
from forgetting.foundation.faults import checkpoint
from forgetting.foundation.layout import Files, Layout
from forgetting.foundation.stagelog import StageLog
from forgetting.records.schemas import DATASETS, read_dataset, write_dataset
from forgetting.report.stats.cache_validation import compute_cache_validation
from forgetting.report.stats.checks import (
    check_against_plan,
    check_eval_statuses,
    check_run_ids,
    eval_errors,
    eval_errors_message,
)
from forgetting.report.stats.comparisons import (
    Bootstrap,
    compute_comparisons,
    compute_effects,
    compute_summary,
    cost_components,
    missing_cost_runs,
)
from forgetting.report.stats.metrics import StudyData
from forgetting.report.stats.schemas import CACHE_VALIDATION_SCHEMA, SETTINGS_FIELD, STATS
from forgetting.study.config import Study
from forgetting.study.plan import plan_runs
from forgetting.study.statistics import StatsSettings

#: the datasets the statistics read
STATS_INPUTS: tuple[str, ...] = ("runs", "tool_calls", "run_costs")


def compute_statistics(
    runs: pa.Table,
    tool_calls: pa.Table | None,
    run_costs: pa.Table | None,
    settings: StatsSettings,
    *,
    profile: str | None = None,
    task_order: Sequence[str] = (),
    agent_order: Sequence[str] = (),
    redo_command: str | None = None,
    profiles: Sequence[str] = (),
) -> dict[str, pa.Table]:
    """The ``effects``, ``comparisons``, ``summary`` and ``cache_validation`` tables of a
    study's datasets (``profiles``: the pricing profiles' order in the last).

    Checks first (:mod:`forgetting.report.stats.checks`): evaluation statuses, run ids of the other
    datasets, and evaluation errors, which under ``evaluation.on_error: fail`` stop here with
    one line naming the runs and ``redo_command``.
    """
    check_eval_statuses(runs)
    check_run_ids(runs, tool_calls, "tool_calls")
    check_run_ids(runs, run_costs, "run_costs")
    errors = eval_errors(runs)
    if errors and settings.on_error == "fail":
        n_runs = sum(1 for s in runs.column("status").to_pylist() if s != "missing")
        raise RunOutputError(eval_errors_message(errors, n_runs, redo_command))
    data = StudyData.from_tables(
        runs,
        tool_calls,
        task_order=task_order,
        agent_order=agent_order,
        exclude_eval_errors=settings.on_error == "exclude",
    )
    for agent in data.agents:
        data.baseline(agent)  # fails early, naming the agent, when a baseline is absent
    components = None
    if run_costs is not None and profile is not None:
        lacking = missing_cost_runs(runs, run_costs, profile)
        if lacking:
            raise RunOutputError(
                f"run_costs dataset: {len(lacking)} runs have no row for pricing profile {profile!r} "
                f"(e.g. {lacking[0]}); rerun the cost analysis or set pricing.primary"
            )
        components = cost_components(runs, run_costs, profile, data)
    boot = Bootstrap(data, settings)
    validation = (
        compute_cache_validation(runs, run_costs, data, boot.weights_for, settings.confidence, profiles)
        if run_costs is not None
        else CACHE_VALIDATION_SCHEMA.empty_table()
    )
    return {
        "effects": compute_effects(boot),
        "comparisons": compute_comparisons(boot),
        "summary": compute_summary(data, settings, components, profile),
        "cache_validation": validation,
    }


def _paths(
    given: Mapping[str, str | os.PathLike[str]] | Sequence[str | os.PathLike[str]] | None,
    default_dir: Path,
    names: Sequence[str],
) -> dict[str, Path]:
    if given is None:
        return {n: default_dir / f"{n}.parquet" for n in names}
    if isinstance(given, Mapping):
        return {str(k): Path(v) for k, v in given.items() if str(k) in names}
    return {Path(p).stem: Path(p) for p in given if Path(p).stem in names}


def write_stats(
    study: Study,
    inputs: Files | None = None,
    outputs: Mapping[str, str | os.PathLike[str]] | Sequence[str | os.PathLike[str]] | None = None,
    log: str | os.PathLike[str] | None = None,
    *,
    configs: Sequence[str] | None = None,
    overrides: Sequence[str] = (),
) -> dict[str, Path]:
    """Compute the statistics of ``study`` from its datasets and write them atomically.

    ``configs`` and ``overrides`` (``KEY=VALUE``) are how the user named the study (the
    ``forgetting`` command's arguments, or Snakemake's config files); an evaluation error
    under ``evaluation.on_error: fail`` names the redo command with them.
    """
    layout = Layout(study.results_dir)
    in_paths = _paths(inputs, layout.datasets, STATS_INPUTS)
    out_paths = _paths(outputs, layout.stats, tuple(STATS))
    settings = study.statistics
    with StageLog(log) as out:
        started = time.perf_counter()
        tables = {
            name: read_dataset(in_paths[name], DATASETS[name]) for name in STATS_INPUTS if name in in_paths
        }
        if "runs" not in tables:
            raise RunOutputError("stats: no runs dataset given")
        check_against_plan(tables["runs"], [r.run_id for r in plan_runs(study)])
        files = list(configs) if configs else config_files_of(study.source)
        for error in eval_errors(tables["runs"]):
            out.line(f"evaluation error {error.run_id} ({error.task}): {error.status}")
        profile = study.pricing.primary
        result = compute_statistics(
            tables["runs"],
            tables.get("tool_calls"),
            tables.get("run_costs"),
            settings,
            profile=profile if "run_costs" in tables else None,
            task_order=study.tasks,
            agent_order=study.agents,
            redo_command=redo_command(files, overrides) if files else None,
            profiles=list(study.pricing.names),
        )
        recorded = {SETTINGS_FIELD: json.dumps(settings.computed_with(), sort_keys=True)}
        for name, path in out_paths.items():
            write_dataset(result[name], path, STATS[name], metadata=recorded)
            checkpoint("stats.output")
        out.line(
            f"stats: {result['effects'].num_rows} effect rows, "
            f"{result['comparisons'].num_rows} comparison rows "
            f"from {tables['runs'].num_rows} runs; {settings.resamples} resamples (seed {settings.seed}) "
            f"in {time.perf_counter() - started:.1f} s"
        )
    return out_paths
