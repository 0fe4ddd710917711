"""Declared Parquet schemas of every dataset the pipeline writes.

Datasets (SPEC §7): one row per run (:data:`RUNS_SCHEMA`), per model call
(:data:`CALLS_SCHEMA`), per tool call (:data:`TOOL_CALLS_SCHEMA`); plus the run plan and the
per-run cost under each pricing profile (:data:`RUN_COSTS_SCHEMA`). Wall-clock data (start
times, latencies) lives only in :data:`TIMINGS_SCHEMA`, so the other datasets are
byte-identical between two runs of the same config and seed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from forgetting.errors import RunOutputError

#: the columns that identify a run and its deletion configuration (:meth:`forgetting.plan.Run.identity`)
RUN_IDENTITY: list[tuple[str, pa.DataType]] = [
    ("run_id", pa.string()),
    ("agent", pa.string()),
    ("configuration", pa.string()),
    ("task", pa.string()),
    ("repeat", pa.int32()),
    ("seed", pa.int64()),
    ("policy", pa.string()),
    ("scope", pa.string()),
    ("granularity", pa.string()),
    ("amount", pa.float64()),
    ("timing", pa.string()),
    ("keep_last", pa.int32()),
]

PLAN_SCHEMA = pa.schema([*RUN_IDENTITY, ("batch", pa.string())])

RUNS_SCHEMA = pa.schema(
    [
        *RUN_IDENTITY,
        ("model_backend", pa.string()),
        # outcome (SPEC §3)
        ("status", pa.string()),  # submitted | capped | context_exceeded | error | missing (collect)
        ("exit_status", pa.string()),  # the agent's own word (Submitted, LimitsExceeded, …)
        ("turns", pa.int32()),
        ("capped", pa.bool_()),
        ("looping", pa.bool_()),
        ("context_exceeded", pa.bool_()),
        ("patch_missing", pa.bool_()),
        ("error", pa.string()),
        ("eval_status", pa.string()),  # resolved | unresolved | empty_patch | patch_failed | timeout | error
        ("resolved", pa.bool_()),
        # behaviour (SPEC §4)
        ("n_tool_calls", pa.int32()),
        ("n_reads", pa.int32()),
        ("n_refetches", pa.int32()),
        ("refetch_rate", pa.float64()),
        ("n_refetches_deleted", pa.int32()),
        ("n_refetches_kept", pa.int32()),
        ("median_refetch_distance", pa.float64()),
        # deleted vs kept read outputs and how many of each were re-fetched (docs/behaviour.md)
        ("n_outputs_deleted", pa.int32()),
        ("n_outputs_deleted_refetched", pa.int32()),
        ("n_outputs_kept", pa.int32()),
        ("n_outputs_kept_refetched", pa.int32()),
        # tokens and cost under the primary pricing profile (SPEC §5)
        ("prompt_tokens", pa.int64()),
        ("output_tokens", pa.int64()),
        ("cached_tokens", pa.int64()),
        ("new_tokens", pa.int64()),
        ("rebilled_tokens", pa.int64()),
        ("deleted_tokens", pa.int64()),
        ("cost_flat", pa.float64()),
        ("cost_cache", pa.float64()),
        ("reported_cached_tokens", pa.int64()),
    ]
)

CALLS_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("call", pa.int32()),  # 1-based model call index
        ("n_messages", pa.int32()),
        ("prompt_tokens", pa.int64()),
        ("output_tokens", pa.int64()),
        ("prefix_tokens", pa.int64()),  # longest common prefix with any earlier prompt (profile-free)
        # split of the prompt under the primary pricing profile (docs/cost.md)
        ("cached_tokens", pa.int64()),
        ("new_tokens", pa.int64()),
        ("rebilled_tokens", pa.int64()),
        ("cache_write_tokens", pa.int64()),
        ("reported_cached_tokens", pa.int64()),  # null when the server reported none
        ("deleted_parts", pa.int32()),  # parts rewritten in this prompt (cumulative)
        ("deleted_tokens", pa.int64()),  # tokens those rewrites removed from this prompt
        ("new_deleted_parts", pa.int32()),  # parts first rewritten in this call
        ("new_deleted_tokens", pa.int64()),
        ("finish_reason", pa.string()),
        ("cost_flat", pa.float64()),
        ("cost_cache", pa.float64()),
    ]
)

TOOL_CALLS_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("turn", pa.int32()),  # the model call that issued it (1-based)
        ("index", pa.int32()),  # position among the turn's tool calls (0-based)
        ("tool", pa.string()),
        ("summary", pa.string()),  # command or arguments summary
        ("label", pa.string()),  # read | search | edit | test | submit | other
        ("is_read", pa.bool_()),
        ("n_distinct_lines", pa.int32()),
        ("is_refetch", pa.bool_()),
        ("overlap", pa.float64()),
        ("refetch_distance", pa.int32()),
        ("was_deleted", pa.bool_()),
    ]
)

RUN_COSTS_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("profile", pa.string()),
        ("calls", pa.int32()),
        ("prompt_tokens", pa.int64()),
        ("cached_tokens", pa.int64()),
        ("new_tokens", pa.int64()),
        ("rebilled_tokens", pa.int64()),
        ("cache_write_tokens", pa.int64()),
        ("output_tokens", pa.int64()),
        ("cost_cached", pa.float64()),
        ("cost_new", pa.float64()),
        ("cost_rebilled", pa.float64()),
        ("cost_cache_write", pa.float64()),  # the write premium over the input price
        ("cost_output", pa.float64()),
        ("cost_cache", pa.float64()),
        ("cost_flat", pa.float64()),
        # agreement with server-reported cache hits, over the calls that reported them
        ("reported_calls", pa.int32()),
        ("reported_cached_tokens", pa.int64()),  # null when no call reported
        ("reconstructed_cached_tokens", pa.int64()),  # this profile's hits on those calls
        ("cache_agreement", pa.float64()),  # reported / reconstructed
    ]
)

TIMINGS_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("started", pa.float64()),  # unix seconds
        ("wall_s", pa.float64()),
        ("model_s", pa.float64()),
        ("calls", pa.int32()),
    ]
)

DATASETS: dict[str, pa.Schema] = {
    "runs": RUNS_SCHEMA,
    "calls": CALLS_SCHEMA,
    "tool_calls": TOOL_CALLS_SCHEMA,
    "run_costs": RUN_COSTS_SCHEMA,
    "timings": TIMINGS_SCHEMA,
}


def write_table(table: pa.Table, path: str | os.PathLike[str]) -> None:
    """Write Parquet with fixed options, so equal tables give equal bytes."""
    pq.write_table(
        table,
        str(path),
        compression="zstd",
        use_dictionary=True,
        write_statistics=True,
        version="2.6",
    )


def write_dataset(table: pa.Table, path: str | os.PathLike[str], schema: pa.Schema) -> None:
    """Cast to the declared schema (failing loudly on a mismatch) and write atomically."""
    from forgetting.atomic import atomic_path

    table = conform(table, schema, str(path))
    with atomic_path(path) as tmp:
        write_table(table, tmp)


def conform(table: pa.Table, schema: pa.Schema, what: str) -> pa.Table:
    """Select and cast ``table``'s columns to ``schema``; missing columns are an error."""
    missing = [n for n in schema.names if n not in table.column_names]
    if missing:
        raise ValueError(f"{what}: columns missing from the declared schema: {', '.join(missing)}")
    return table.select(schema.names).cast(schema)


def read_dataset(path: str | os.PathLike[str], schema: pa.Schema | None = None) -> pa.Table:
    """Read a Parquet file; a corrupt or foreign file is a one-line :class:`RunOutputError`."""
    p = Path(path)
    if not p.is_file():
        raise RunOutputError(f"{p}: dataset not found")
    try:
        table = pq.read_table(str(p))
    except (pa.ArrowException, OSError) as exc:
        raise RunOutputError(f"{p}: not a readable Parquet file ({exc}); delete it and rerun its stage") from None
    if schema is not None:
        try:
            table = conform(table, schema, str(p))
        except (ValueError, pa.ArrowException) as exc:
            raise RunOutputError(f"{p}: does not match its declared schema ({exc})") from None
    return table
