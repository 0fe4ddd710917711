"""A run's cost under a set of pricing profiles: per-call table, per-profile totals, summary.

Costs (currency per million tokens ÷ 10⁶), for a call with ``n`` prompt tokens, ``hit``
cached, ``written`` written to the cache and ``O`` output tokens:

* flat: ``n·input + O·output``;
* caching-aware: ``hit·cached_input + (n − hit)·input + written·(cache_write − input)
  + O·output`` — the last-but-one term is the write premium (0 when ``cache_write`` equals
  ``input``, as in the paper). By kind: cached input ``hit·cached_input``, new input
  ``new·input``, re-billed input ``rebilled·input``, cache-write premium, output.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from forgetting import schemas
from forgetting.cost.accounting import CallAccount, account, split
from forgetting.cost.pricing import PricingProfile
from forgetting.cost.prompts import RunPrompts
from forgetting.cost.sources import load_run
from forgetting.errors import UserError
from forgetting.records import Located

PER_MILLION = 1_000_000.0

#: the per-run columns of the runs dataset this stage fills (primary profile)
SUMMARY_COLUMNS = (
    "prompt_tokens",
    "output_tokens",
    "cached_tokens",
    "new_tokens",
    "rebilled_tokens",
    "deleted_tokens",
    "cost_flat",
    "cost_cache",
    "reported_cached_tokens",
)


@dataclass
class CostResult:
    run_id: str
    source: Path
    kind: str
    primary: str
    profiles: tuple[PricingProfile, ...]
    calls: pa.Table  # schemas.CALLS_SCHEMA, costs under the primary profile
    run_costs: pa.Table  # schemas.RUN_COSTS_SCHEMA, one row per profile
    summary: dict[str, Any]  # SUMMARY_COLUMNS, primary profile
    calls_by_profile: dict[str, pa.Table] = field(default_factory=dict)
    #: the line a torn call log was cut at (costed with ``allow_torn``); None when whole
    torn_line: int | None = None

    def profile_row(self, name: str) -> dict[str, Any]:
        for row in self.run_costs.to_pylist():
            if row["profile"] == name:
                return row
        raise KeyError(name)

    def agreement(self, profile: str = "vllm-blocks") -> dict[str, Any] | None:
        """Reported vs reconstructed cache hits over the calls where the server reported
        them, under ``profile`` (falls back to the primary when not computed); None when
        no call reported cached tokens."""
        name = profile if profile in self.calls_by_profile else self.primary
        row = self.profile_row(name)
        if row["reported_cached_tokens"] is None:
            return None
        return {
            "profile": name,
            "calls": row["reported_calls"],
            "reported": row["reported_cached_tokens"],
            "reconstructed": row["reconstructed_cached_tokens"],
            "difference": row["reported_cached_tokens"] - row["reconstructed_cached_tokens"],
            "ratio": row["cache_agreement"],
        }


def _deleted_columns(run: RunPrompts) -> dict[str, list[int]]:
    """Rewritten parts — (turn, part) pairs: a turn's tool output may span several messages —
    and the tokens of the original they removed (``tokens_removed`` of each rewritten message,
    see :mod:`forgetting.records.deletion_record`), cumulative and new per call."""
    seen: set[tuple[int, str, int]] = set()
    seen_parts: set[tuple[int, str]] = set()
    parts = tokens = 0
    out: dict[str, list[int]] = {
        k: [] for k in ("deleted_parts", "deleted_tokens", "new_deleted_parts", "new_deleted_tokens")
    }
    for call in run.calls:
        new_parts = new_tokens = 0
        for d in call.deleted:
            if d.identity in seen:
                continue  # a message rewritten once stays rewritten; logged again, it counts once
            seen.add(d.identity)
            new_tokens += d.tokens_removed
            if (d.turn, d.part) not in seen_parts:
                seen_parts.add((d.turn, d.part))
                new_parts += 1
        parts += new_parts
        tokens += new_tokens
        out["deleted_parts"].append(parts)
        out["deleted_tokens"].append(tokens)
        out["new_deleted_parts"].append(new_parts)
        out["new_deleted_tokens"].append(new_tokens)
    return out


def _calls_table(
    run: RunPrompts, acc: list[CallAccount], k: int, p: PricingProfile, deleted: dict[str, list[int]]
) -> pa.Table:
    cols: dict[str, list[Any]] = {name: [] for name in schemas.CALLS_SCHEMA.names}
    for call, a in zip(run.calls, acc, strict=True):
        step = a.steps[k]
        cached, new, rebilled = split(a.prompt_tokens, step.hit, a.boundary)
        out = call.output_tokens
        cols["run_id"].append(run.run_id)
        cols["call"].append(call.call)
        cols["n_messages"].append(call.n_messages)
        cols["prompt_tokens"].append(a.prompt_tokens)
        cols["output_tokens"].append(out)
        cols["prefix_tokens"].append(a.prefix_tokens)
        cols["cached_tokens"].append(cached)
        cols["new_tokens"].append(new)
        cols["rebilled_tokens"].append(rebilled)
        cols["cache_write_tokens"].append(step.written)
        cols["reported_cached_tokens"].append(call.reported_cached)
        cols["finish_reason"].append(call.finish_reason)
        cols["cost_flat"].append((a.prompt_tokens * p.input + out * p.output) / PER_MILLION)
        cols["cost_cache"].append(
            (
                cached * p.cached_input
                + (new + rebilled) * p.input
                + step.written * (p.cache_write - p.input)
                + out * p.output
            )
            / PER_MILLION
        )
    cols.update(deleted)
    return pa.Table.from_pydict(cols, schema=schemas.CALLS_SCHEMA)


def _run_costs_row(run: RunPrompts, acc: list[CallAccount], k: int, p: PricingProfile) -> dict[str, Any]:
    tot = {"prompt": 0, "cached": 0, "new": 0, "rebilled": 0, "written": 0, "output": 0}
    reported_calls = reported = reconstructed = 0
    for call, a in zip(run.calls, acc, strict=True):
        step = a.steps[k]
        cached, new, rebilled = split(a.prompt_tokens, step.hit, a.boundary)
        tot["prompt"] += a.prompt_tokens
        tot["cached"] += cached
        tot["new"] += new
        tot["rebilled"] += rebilled
        tot["written"] += step.written
        tot["output"] += call.output_tokens
        if call.reported_cached is not None:
            reported_calls += 1
            reported += call.reported_cached
            reconstructed += cached
    cost_cached = tot["cached"] * p.cached_input / PER_MILLION
    cost_new = tot["new"] * p.input / PER_MILLION
    cost_rebilled = tot["rebilled"] * p.input / PER_MILLION
    cost_write = tot["written"] * (p.cache_write - p.input) / PER_MILLION
    cost_output = tot["output"] * p.output / PER_MILLION
    return {
        "run_id": run.run_id,
        "profile": p.name,
        "calls": len(run.calls),
        "prompt_tokens": tot["prompt"],
        "cached_tokens": tot["cached"],
        "new_tokens": tot["new"],
        "rebilled_tokens": tot["rebilled"],
        "cache_write_tokens": tot["written"],
        "output_tokens": tot["output"],
        "cost_cached": cost_cached,
        "cost_new": cost_new,
        "cost_rebilled": cost_rebilled,
        "cost_cache_write": cost_write,
        "cost_output": cost_output,
        "cost_cache": cost_cached + cost_new + cost_rebilled + cost_write + cost_output,
        "cost_flat": (tot["prompt"] * p.input + tot["output"] * p.output) / PER_MILLION,
        "reported_calls": reported_calls,
        "reported_cached_tokens": reported if reported_calls else None,
        "reconstructed_cached_tokens": reconstructed if reported_calls else None,
        "cache_agreement": (reported / reconstructed) if reported_calls and reconstructed else None,
    }


def cost_prompts(
    run: RunPrompts, profiles: Sequence[PricingProfile], *, primary: str | None = None
) -> CostResult:
    """Cost an already loaded run (see :func:`cost_run`)."""
    if not profiles:
        raise UserError("no pricing profile given")
    names = [p.name for p in profiles]
    primary = primary or names[0]
    if primary not in names:
        raise UserError(
            f"primary pricing profile {primary!r} is not among the profiles computed: {', '.join(names)}"
        )
    acc = account(run, profiles)
    deleted = _deleted_columns(run)
    by_profile = {p.name: _calls_table(run, acc, k, p, deleted) for k, p in enumerate(profiles)}
    rows = [_run_costs_row(run, acc, k, p) for k, p in enumerate(profiles)]
    run_costs = pa.Table.from_pylist(rows, schema=schemas.RUN_COSTS_SCHEMA)
    prow = rows[names.index(primary)]
    summary = {
        "prompt_tokens": prow["prompt_tokens"],
        "output_tokens": prow["output_tokens"],
        "cached_tokens": prow["cached_tokens"],
        "new_tokens": prow["new_tokens"],
        "rebilled_tokens": prow["rebilled_tokens"],
        "deleted_tokens": deleted["deleted_tokens"][-1] if run.calls else 0,
        "cost_flat": prow["cost_flat"],
        "cost_cache": prow["cost_cache"],
        "reported_cached_tokens": prow["reported_cached_tokens"],
    }
    return CostResult(
        run.run_id,
        run.source,
        run.kind,
        primary,
        tuple(profiles),
        by_profile[primary],
        run_costs,
        summary,
        by_profile,
        run.torn_line,
    )


def cost_run(
    path: str | os.PathLike[str] | Located,
    profiles: Sequence[PricingProfile],
    *,
    primary: str | None = None,
    run_id: str | None = None,
    allow_torn: bool = False,
) -> CostResult:
    """Cost a run directory, a call log (``calls.jsonl``) or a mini-swe-agent trajectory (a
    path, or what :func:`forgetting.records.locate` made of one) under ``profiles``; the
    per-call table and the summary use ``primary`` (default: the first profile). A torn call
    log is an error unless ``allow_torn``: then the calls before the torn line are costed and
    ``torn_line`` says where it was."""
    return cost_prompts(load_run(path, run_id, allow_torn=allow_torn), profiles, primary=primary)
