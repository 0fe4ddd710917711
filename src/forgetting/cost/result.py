"""A run's cost under a set of pricing profiles: per-call table, per-profile totals, summary.

Costs (currency per million tokens ÷ 10⁶), for a call with ``n`` prompt tokens, ``hit``
cached, ``written`` written to the cache and ``O`` output tokens:

* flat: ``n·input + O·output``;
* caching-aware: ``hit·cached_input + (n − hit)·input + written·(cache_write − input)
  + O·output`` — the last-but-one term is the write premium (0 when ``cache_write`` equals
  ``input``, as in the paper). By kind: cached input ``hit·cached_input``, new input
  ``new·input``, re-billed input ``rebilled·input``, cache-write premium, output.
* reported: the same formula with the server's own counts (:class:`forgetting.prompt.usage.Usage`)
  — ``prompt_tokens`` for ``n``, its cached tokens for ``hit``, its cache-write tokens for
  ``written`` (0 when it reports none: a provider that bills writes reports them) — for each
  call whose server reported cached tokens; None for the others. Beside it, per profile, the
  reconstruction's caching-aware cost of the same calls (``cost_cache_on_reported``).

The prompt check: every call whose server reported ``prompt_tokens`` R is compared with the
prompt the cost stage rebuilt (``n``, the call log's token ids: the chat template applied);
``|n − R| > prompt_tolerance · R`` is a *prompt mismatch* (``pricing.prompt_tolerance``),
flagged per call and counted per run, so a chat template or tokenizer that drifts from the
served model's is seen before a cost is trusted.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from forgetting.cost.accounting import CallAccount, account, split
from forgetting.cost.pricing import PricingProfile
from forgetting.cost.prompts import CallPrompt, RunPrompts
from forgetting.cost.sources import load_run
from forgetting.foundation import config_schema
from forgetting.foundation.errors import UserError
from forgetting.records import Located, schemas

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
    "prompt_checked_calls",
    "prompt_mismatch_calls",
    "prompt_token_difference",
    "cost_reported",
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
    #: the relative difference from the server's ``prompt_tokens`` a call may have
    prompt_tolerance: float = 0.0
    #: how the prompts were counted (:attr:`forgetting.cost.prompts.RunPrompts.prompt_count`)
    prompt_count: str = "approximation"
    #: the server's prefix-cache block the call log recorded (None: none recorded)
    kv_block_size: int | None = None
    #: calls whose output tokens were counted with Qwen's BPE (the server reported none)
    output_estimated: int = 0

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


def prompt_mismatch(rebuilt: int, reported: int | None, tolerance: float) -> bool | None:
    """Whether a rebuilt prompt of ``rebuilt`` tokens differs from the server's count by more
    than ``tolerance`` of it (None: the server reported no ``prompt_tokens``)."""
    if reported is None:
        return None
    return abs(rebuilt - reported) > tolerance * reported


def reported_cost(call: CallPrompt, p: PricingProfile) -> float | None:
    """The call priced from the server's own counts (None: it reported no cached tokens)."""
    u = call.usage
    if u.cached_tokens is None or u.prompt_tokens is None:
        return None
    written = u.cache_write_tokens or 0
    return (
        u.cached_tokens * p.cached_input
        + (u.prompt_tokens - u.cached_tokens) * p.input
        + written * (p.cache_write - p.input)
        + call.output_tokens * p.output
    ) / PER_MILLION


def _calls_table(
    run: RunPrompts,
    acc: list[CallAccount],
    k: int,
    p: PricingProfile,
    deleted: dict[str, list[int]],
    tolerance: float,
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
        cols["reported_prompt_tokens"].append(call.usage.prompt_tokens)
        cols["reported_cache_write_tokens"].append(call.usage.cache_write_tokens)
        cols["prompt_mismatch"].append(prompt_mismatch(a.prompt_tokens, call.usage.prompt_tokens, tolerance))
        cols["cost_reported"].append(reported_cost(call, p))
    cols.update(deleted)
    return pa.Table.from_pydict(cols, schema=schemas.CALLS_SCHEMA)


def _run_costs_row(run: RunPrompts, acc: list[CallAccount], k: int, p: PricingProfile) -> dict[str, Any]:
    tot = {"prompt": 0, "cached": 0, "new": 0, "rebilled": 0, "written": 0, "output": 0}
    reported_calls = reported = reconstructed = beyond = 0
    # the reported calls: the server's counts, and the reconstruction's on the same calls
    on = {"prompt": 0, "cached": 0, "rebilled_new": 0, "written": 0, "output": 0}
    server = {"prompt": 0, "written": 0, "cost": 0.0}
    writes_reported = False
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
            # more than the longest prefix any earlier prompt of this run shares: no cache of the
            # run's own prompts holds it (another run's blocks, or blocks of generated tokens)
            beyond += max(0, call.reported_cached - a.prefix_tokens)
            on["prompt"] += a.prompt_tokens
            on["cached"] += cached
            on["rebilled_new"] += new + rebilled
            on["written"] += step.written
            on["output"] += call.output_tokens
            server["prompt"] += call.usage.prompt_tokens or 0
            server["written"] += call.usage.cache_write_tokens or 0
            writes_reported = writes_reported or call.usage.cache_write_tokens is not None
            server["cost"] += reported_cost(call, p) or 0.0
    cost_on_reported = (
        on["cached"] * p.cached_input
        + on["rebilled_new"] * p.input
        + on["written"] * (p.cache_write - p.input)
        + on["output"] * p.output
    ) / PER_MILLION
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
        "cross_run_cached_tokens": beyond if reported_calls else None,
        "cache_agreement": (reported / reconstructed) if reported_calls and reconstructed else None,
        "reported_prompt_tokens": server["prompt"] if reported_calls else None,
        "reconstructed_prompt_tokens": on["prompt"] if reported_calls else None,
        "reported_cache_write_tokens": server["written"] if writes_reported else None,
        "cost_reported": server["cost"] if reported_calls else None,
        "cost_cache_on_reported": cost_on_reported if reported_calls else None,
    }


def default_prompt_tolerance() -> float:
    """``pricing.prompt_tolerance``'s default (the schema's)."""
    return float(config_schema.defaults("pricing")["prompt_tolerance"])


def cost_prompts(
    run: RunPrompts,
    profiles: Sequence[PricingProfile],
    *,
    primary: str | None = None,
    prompt_tolerance: float | None = None,
) -> CostResult:
    """Cost an already loaded run (see :func:`cost_run`)."""
    tolerance = default_prompt_tolerance() if prompt_tolerance is None else float(prompt_tolerance)
    if not profiles:
        raise UserError("no pricing profile given")
    names = [p.name for p in profiles]
    primary = primary or names[0]
    if primary not in names:
        raise UserError(
            f"primary pricing profile {primary!r} is not among the profiles computed: {', '.join(names)}"
        )
    profiles = [p.for_run(run.kv_block_size) for p in profiles]
    acc = account(run, profiles)
    deleted = _deleted_columns(run)
    by_profile = {p.name: _calls_table(run, acc, k, p, deleted, tolerance) for k, p in enumerate(profiles)}
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
        "prompt_checked_calls": sum(1 for c in run.calls if c.usage.prompt_tokens is not None),
        "prompt_mismatch_calls": sum(
            1
            for c, a in zip(run.calls, acc, strict=True)
            if prompt_mismatch(a.prompt_tokens, c.usage.prompt_tokens, tolerance)
        ),
        "prompt_token_difference": sum(
            c.usage.prompt_tokens - a.prompt_tokens
            for c, a in zip(run.calls, acc, strict=True)
            if c.usage.prompt_tokens is not None
        ),
        "cost_reported": prow["cost_reported"],
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
        tolerance,
        run.prompt_count,
        run.kv_block_size,
        run.output_estimated,
    )


def cost_run(
    path: str | os.PathLike[str] | Located,
    profiles: Sequence[PricingProfile],
    *,
    primary: str | None = None,
    run_id: str | None = None,
    allow_torn: bool = False,
    prompt_tolerance: float | None = None,
) -> CostResult:
    """Cost a run directory, a call log (``calls.jsonl``) or a mini-swe-agent trajectory (a
    path, or what :func:`forgetting.records.locate` made of one) under ``profiles``; the
    per-call table and the summary use ``primary`` (default: the first profile). A torn call
    log is an error unless ``allow_torn``: then the calls before the torn line are costed and
    ``torn_line`` says where it was. ``prompt_tolerance``: see the module docstring (default:
    ``pricing.prompt_tolerance``'s)."""
    return cost_prompts(
        load_run(path, run_id, allow_torn=allow_torn), profiles, primary=primary, prompt_tolerance=prompt_tolerance
    )
