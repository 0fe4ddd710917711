"""Declared Parquet schemas of the statistics (``results/…/stats/``).

``effects``      one row per evaluation (agent, configuration) and metric: the statistic on the
                 configuration (``value``) and on its baseline (``reference``), the estimate
                 (Δ or ratio), its percentile CI, bootstrap p-value and raw significance.
``comparisons``  one row per pair of configurations (delayed vs immediate, turn vs token) and
                 metric: the estimate of each and the paired difference ``second − first``.
``summary``      one row per (agent, configuration) incl. the baseline: descriptive figures
                 (tasks solved, median turns, capped, looping, totals, cost components under the
                 primary pricing profile), every one on the row's tasks — for an evaluation the
                 tasks it and its baseline both have (those of its effects), for a baseline its
                 own — and the row's evaluation errors.
``cache_validation``  one row per (agent, configuration) incl. the baseline and pricing profile:
                 the reconstructed cached share against the one the server reported, their gap
                 with a paired bootstrap CI, and the prompt check
                 (:mod:`forgetting.report.stats.cache_validation`).

Each schema declares its key (:func:`forgetting.records.schemas.keyed`).
"""

from __future__ import annotations

import pyarrow as pa

from forgetting.records.schemas import CONFIGURATION_COLUMNS, keyed

#: the schema metadata field of every statistics file recording the settings it was computed with
#: (JSON of :meth:`forgetting.study.statistics.StatsSettings.computed_with`)
SETTINGS_FIELD = "forgetting.statistics"

_IDENTITY = [("agent", pa.string()), ("configuration", pa.string()), *CONFIGURATION_COLUMNS]

EFFECTS_SCHEMA = keyed(pa.schema(
    [
        *_IDENTITY,
        ("metric", pa.string()),
        ("kind", pa.string()),  # difference | ratio | within | median
        ("value", pa.float64()),
        ("reference", pa.float64()),
        ("estimate", pa.float64()),
        ("ci_low", pa.float64()),
        ("ci_high", pa.float64()),
        ("null", pa.float64()),  # NaN: no test
        ("p_value", pa.float64()),
        ("significant", pa.bool_()),  # CI excludes the null; null when no test
        ("n_tasks", pa.int32()),
        ("n_undefined", pa.int32()),  # resamples where the statistic is undefined (e.g. no reads)
    ]
), "agent", "configuration", "metric")

COMPARISONS_SCHEMA = keyed(pa.schema(
    [
        ("agent", pa.string()),
        ("comparison", pa.string()),  # timing (delayed → immediate) | granularity (turn → token)
        ("first", pa.string()),
        ("second", pa.string()),
        ("policy", pa.string()),
        ("scope", pa.string()),
        ("granularity", pa.string()),  # null for granularity comparisons
        ("amount", pa.float64()),
        ("timing", pa.string()),  # null for timing comparisons
        ("metric", pa.string()),
        ("first_estimate", pa.float64()),
        ("second_estimate", pa.float64()),
        ("estimate", pa.float64()),  # second − first
        ("ci_low", pa.float64()),
        ("ci_high", pa.float64()),
        ("p_value", pa.float64()),
        ("significant", pa.bool_()),
        ("n_tasks", pa.int32()),
        ("n_undefined", pa.int32()),
    ]
), "agent", "comparison", "first", "second", "metric")

SUMMARY_SCHEMA = keyed(pa.schema(
    [
        *_IDENTITY,
        ("n_runs", pa.int32()),
        ("n_missing", pa.int32()),
        ("n_tasks", pa.int32()),  # the tasks every column of the row is computed on
        ("repeats", pa.int32()),
        ("tasks_solved", pa.float64()),  # sum over tasks of the mean over repeats
        ("median_turns", pa.float64()),
        ("capped", pa.float64()),
        ("looping", pa.float64()),
        ("input_tokens", pa.float64()),
        ("output_tokens", pa.float64()),
        ("cost_flat", pa.float64()),
        ("cost_cache", pa.float64()),
        ("refetch_rate", pa.float64()),
        ("refetch_distance", pa.float64()),
        ("deleted_rate", pa.float64()),
        ("kept_rate", pa.float64()),
        ("model_backend", pa.string()),
        ("pricing_profile", pa.string()),
        ("cost_cached", pa.float64()),
        ("cost_new", pa.float64()),
        ("cost_rebilled", pa.float64()),
        ("cost_cache_write", pa.float64()),
        ("cost_output", pa.float64()),
        ("baseline_cost", pa.float64()),  # the baseline's caching-aware cost on the row's tasks
        ("n_eval_errors", pa.int32()),  # runs whose evaluation errored (timeout, error)
        ("eval_error_tasks", pa.list_(pa.string())),  # their tasks
        ("n_excluded", pa.int32()),  # runs left out for an evaluation error (on_error: exclude)
    ]
), "agent", "configuration")

CACHE_VALIDATION_SCHEMA = keyed(pa.schema(
    [
        *_IDENTITY,
        ("profile", pa.string()),  # the pricing profile of the reconstruction
        ("n_runs", pa.int32()),
        ("n_tasks", pa.int32()),  # tasks with a run whose server reported cached tokens
        ("calls", pa.int64()),
        ("reported_calls", pa.int64()),  # calls whose server reported cached tokens
        ("runs_without_reports", pa.int32()),  # runs none of whose calls reported them
        ("prompt_checked_calls", pa.int64()),  # calls whose server reported prompt_tokens
        ("prompt_mismatch_calls", pa.int64()),  # of those, beyond pricing.prompt_tolerance
        ("runs_with_mismatch", pa.int32()),
        ("prompt_difference_per_call", pa.float64()),  # mean server − rebuilt prompt tokens; NaN: none checked
        ("reported_share", pa.float64()),  # the server's cached / prompt tokens; NaN: none reported
        ("reconstructed_share", pa.float64()),  # the profile's hits / rebuilt prompt tokens, same calls
        # reported hits beyond any prefix of the run's own earlier prompts / the server's prompt
        # tokens: what no within-run model explains (other runs' blocks on the same server)
        ("cross_run_share", pa.float64()),
        ("estimate", pa.float64()),  # the gap: reconstructed − (reported − cross-run) share
        ("ci_low", pa.float64()),
        ("ci_high", pa.float64()),
        ("n_undefined", pa.int32()),  # resamples without a reported call
        ("cost_reported", pa.float64()),  # those calls priced from the server's counts
        ("cost_reconstructed", pa.float64()),  # and by the profile's reconstruction
    ]
), "agent", "configuration", "profile")

STATS: dict[str, pa.Schema] = {
    "effects": EFFECTS_SCHEMA,
    "comparisons": COMPARISONS_SCHEMA,
    "summary": SUMMARY_SCHEMA,
    "cache_validation": CACHE_VALIDATION_SCHEMA,
}
