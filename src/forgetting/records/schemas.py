"""Declared Parquet schemas of every dataset the pipeline writes.

Datasets (SPEC §7): one row per run (:data:`RUNS_SCHEMA`), per model call
(:data:`CALLS_SCHEMA`), per tool call (:data:`TOOL_CALLS_SCHEMA`); plus the run plan and the
per-run cost under each pricing profile (:data:`RUN_COSTS_SCHEMA`). Wall-clock data (start
times, latencies) lives only in :data:`TIMINGS_SCHEMA`, so the other datasets are
byte-identical between two runs of the same config and seed.

Every schema declares its **key** (:func:`keyed`, :func:`key_of`): the columns that name one
row — ``run_id`` for a run, ``run_id`` + ``call`` for a model call, … . The key travels in the
file's schema metadata, and :func:`read_dataset` and :func:`write_dataset` refuse a table in
which two rows share a key, or a key column is null, with one line naming the file, the key
and an example.

Every number of the run datasets and the plan is a count, a cost, a share, a seed or a time:
finite and not negative (:data:`SIGNED` names the one exception). :func:`read_dataset` refuses
a value out of that range — a negative cost, a NaN — naming the file, the row and the column,
so that no such value reaches a table.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from forgetting.foundation.atomic import atomic_path
from forgetting.foundation.errors import RunOutputError

#: the schema metadata field that holds a dataset's key columns (comma-separated)
KEY_FIELD = b"forgetting.key"


def keyed(schema: pa.Schema, *columns: str) -> pa.Schema:
    """``schema`` declaring ``columns`` as its key (each row has its own combination)."""
    unknown = [c for c in columns if c not in schema.names]
    if unknown or not columns:
        raise ValueError(f"key columns {unknown or columns} are not columns of the schema")
    return schema.with_metadata({**(schema.metadata or {}), KEY_FIELD: ",".join(columns).encode()})


def key_of(schema: pa.Schema) -> tuple[str, ...]:
    """The key columns a schema declares (empty when it declares none)."""
    raw = (schema.metadata or {}).get(KEY_FIELD)
    return tuple(raw.decode().split(",")) if raw else ()

#: the columns of a deletion configuration (:meth:`forgetting.grid.Deletion.columns`)
CONFIGURATION_COLUMNS: list[tuple[str, pa.DataType]] = [
    ("policy", pa.string()),
    ("scope", pa.string()),
    ("granularity", pa.string()),
    ("amount", pa.float64()),
    ("timing", pa.string()),
    ("keep_last", pa.int32()),
]
#: the columns that identify a run and its deletion configuration (:meth:`forgetting.study.plan.Run.identity`)
RUN_IDENTITY: list[tuple[str, pa.DataType]] = [
    ("run_id", pa.string()), ("agent", pa.string()), ("configuration", pa.string()), ("task", pa.string()),
    ("repeat", pa.int32()), ("seed", pa.int64()),
    *CONFIGURATION_COLUMNS,
]

PLAN_SCHEMA = keyed(pa.schema([*RUN_IDENTITY, ("batch", pa.string())]), "run_id")

RUNS_SCHEMA = keyed(pa.schema(
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
        # the server's counts (docs/cost.md, "Checked against the server")
        ("prompt_checked_calls", pa.int32()),  # calls whose server reported prompt_tokens
        ("prompt_mismatch_calls", pa.int32()),  # of those, beyond pricing.prompt_tolerance
        ("prompt_token_difference", pa.int64()),  # Σ over those calls of server − rebuilt prompt tokens
        ("cost_reported", pa.float64()),  # priced from the server's cached tokens; null: none reported
    ]
), "run_id")

CALLS_SCHEMA = keyed(pa.schema(
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
        # what the server reported (null: not reported) and the reported view's price
        ("reported_prompt_tokens", pa.int64()),
        ("reported_cache_write_tokens", pa.int64()),
        ("prompt_mismatch", pa.bool_()),  # rebuilt prompt_tokens beyond pricing.prompt_tolerance of the server's
        ("cost_reported", pa.float64()),
    ]
), "run_id", "call")

TOOL_CALLS_SCHEMA = keyed(pa.schema(
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
), "run_id", "turn", "index")

RUN_COSTS_SCHEMA = keyed(pa.schema(
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
        # reported hits beyond the run's own earlier prompts (another run's blocks on the server)
        ("cross_run_cached_tokens", pa.int64()),
        ("cache_agreement", pa.float64()),  # reported / reconstructed
        # the reported view over those calls, and the reconstruction on the same calls
        ("reported_prompt_tokens", pa.int64()),  # the server's prompt_tokens
        ("reconstructed_prompt_tokens", pa.int64()),  # the rebuilt prompts' tokens
        ("reported_cache_write_tokens", pa.int64()),  # null when no call reported writes
        ("cost_reported", pa.float64()),  # priced from the server's counts
        ("cost_cache_on_reported", pa.float64()),  # this profile's caching-aware cost of the same calls
    ]
), "run_id", "profile")

TIMINGS_SCHEMA = keyed(pa.schema(
    [
        ("run_id", pa.string()),
        ("started", pa.float64()),  # unix seconds
        ("wall_s", pa.float64()),
        ("model_s", pa.float64()),
        ("calls", pa.int32()),
    ]
), "run_id")

DATASETS: dict[str, pa.Schema] = {
    "runs": RUNS_SCHEMA,
    "calls": CALLS_SCHEMA,
    "tool_calls": TOOL_CALLS_SCHEMA,
    "run_costs": RUN_COSTS_SCHEMA,
    "timings": TIMINGS_SCHEMA,
}


#: the numeric columns of the run datasets that may be negative (server − rebuilt prompt tokens)
SIGNED = frozenset({"prompt_token_difference"})


def _range_checked(schema: pa.Schema) -> bool:
    """Whether ``schema`` is one of the run datasets' or the plan's (whose numbers are all
    counts, costs, shares, seeds or times)."""
    return any(schema.equals(s, check_metadata=True) for s in (*DATASETS.values(), PLAN_SCHEMA))


def value_problem(table: pa.Table, schema: pa.Schema) -> str | None:
    """The first value of ``table`` (a table of ``schema``, a run dataset's) out of its range
    — negative, or a float that is NaN or infinite — as ``row R (KEY), column C: V is …``, or
    None. Nulls are not values (an unreported count is null)."""
    if not _range_checked(schema) or table.num_rows == 0:
        return None
    first: tuple[int, str, str] | None = None
    for field in schema:
        if not (pa.types.is_integer(field.type) or pa.types.is_floating(field.type)):
            continue
        column = table.column(field.name)
        floating = pa.types.is_floating(field.type)
        bad = pc.fill_null(pc.invert(pc.is_finite(column)), False) if floating else None
        if field.name not in SIGNED:
            negative = pc.fill_null(pc.less(column, 0), False)
            bad = negative if bad is None else pc.or_(bad, negative)
        if bad is None:
            continue
        where = pc.indices_nonzero(bad)
        if len(where) == 0:
            continue
        row = where[0].as_py()
        if first is None or row < first[0]:
            value = column[row].as_py()
            why = "not a finite number" if floating and not math.isfinite(value) else "negative"
            first = (row, field.name, f"{value!r} is {why}")
    if first is None:
        return None
    row, name, what = first
    key = key_of(schema)
    shown = f" ({', '.join(f'{k} {table.column(k)[row].as_py()!r}' for k in key)})" if key else ""
    return f"row {row + 1}{shown}, column {name!r}: {what} (a count or cost is a finite number ≥ 0)"


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


def write_dataset(
    table: pa.Table,
    path: str | os.PathLike[str],
    schema: pa.Schema,
    metadata: dict[str, str] | None = None,
) -> None:
    """Cast to the declared schema (failing loudly on a mismatch), check its key and write
    atomically; ``metadata`` adds key–value pairs to the file's schema metadata."""
    table = checked_dataset(table, path, schema, metadata)
    with atomic_path(path) as tmp:
        write_table(table, tmp)


def checked_dataset(
    table: pa.Table, path: str | os.PathLike[str], schema: pa.Schema, metadata: dict[str, str] | None = None
) -> pa.Table:
    """What :func:`write_dataset` writes to ``path`` (cast, metadata added, key checked: a
    problem names ``path``), not yet written."""
    table = conform(table, schema, str(path))
    if metadata:
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), **metadata})
    problem = key_problem(table, key_of(schema))
    if problem:
        raise RunOutputError(f"{path}: {problem}; nothing written")
    return table


def _show(values: tuple[object, ...]) -> str:
    return repr(values[0]) if len(values) == 1 else "(" + ", ".join(repr(v) for v in values) + ")"


def key_problem(table: pa.Table, key: tuple[str, ...]) -> str | None:
    """Why ``table`` breaks its ``key`` (a null key column, two rows with one key), or None."""
    if not key or table.num_rows == 0:
        return None
    for column in key:
        nulls = table.column(column).null_count
        if nulls:
            return f"key column {column!r} is null in {nulls} row(s)"
    counts = table.select(list(key)).group_by(list(key)).aggregate([([], "count_all")])
    if counts.num_rows == table.num_rows:
        return None

    dups = counts.filter(pc.greater(counts.column("count_all"), 1))
    # the example: the first key of the file that repeats (the error path only)
    rows = list(zip(*(table.column(c).to_pylist() for c in key), strict=True))
    seen: set[tuple[object, ...]] = set()
    example: tuple[object, ...] = ()
    for values in rows:
        if values in seen:
            example = values
            break
        seen.add(values)
    times = rows.count(example)
    return (
        f"duplicate key ({', '.join(key)}): {_show(example)} is in {times} rows "
        f"({dups.num_rows} key(s) duplicated, {table.num_rows - counts.num_rows} extra row(s))"
    )


def conform(table: pa.Table, schema: pa.Schema, what: str) -> pa.Table:
    """Select and cast ``table``'s columns to ``schema``; missing columns are an error."""
    missing = [n for n in schema.names if n not in table.column_names]
    if missing:
        raise ValueError(f"{what}: columns missing from the declared schema: {', '.join(missing)}")
    return table.select(schema.names).cast(schema)


def read_metadata(path: str | os.PathLike[str]) -> dict[str, str]:
    """The key–value schema metadata of a Parquet file (empty when unreadable)."""
    try:
        raw = pq.read_schema(str(path)).metadata or {}
    except (pa.ArrowException, OSError):
        return {}
    return {k.decode(): v.decode() for k, v in raw.items()}


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
        problem = key_problem(table, key_of(schema)) or value_problem(table, schema)
        if problem:
            raise RunOutputError(f"{p}: {problem}; regenerate it (delete it and rerun its stage)")
    return table
