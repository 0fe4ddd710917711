"""Synthetic per-run tables with paper-like effects, for tests, benchmarks and dry runs.

No model, agent or evaluation is involved: every run's outcome is drawn from a small
generative model whose effects mimic the paper's findings (delayed deletion barely changes
tasks solved, immediate tool-output deletion hurts; deleting tool output lengthens runs and
multiplies re-fetches; rewriting history re-bills input, so caching-aware cost rises while
flat cost can fall). The tables follow the declared schemas, with ``model_backend`` set to
``synthetic`` so nothing downstream can mistake them for measurements.

Each run's draws come from its own seed (``forgetting.study.plan`` derives it from the run id), so
the rows of a run do not depend on which other runs are generated.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa

from forgetting.foundation.seeds import unit as _unit
from forgetting.records.schemas import CALLS_SCHEMA, RUN_COSTS_SCHEMA, RUNS_SCHEMA, TIMINGS_SCHEMA, TOOL_CALLS_SCHEMA
from forgetting.study.plan import Run

#: USD per million tokens: input, cached input, output (the paper's price sheet)
PRICES = (0.45, 0.09, 2.25)


def _effects(run: Run) -> dict[str, float]:
    d = run.deletion
    if d.is_baseline:
        return {
            "solve": 0.0,
            "turns": 1.0,
            "refetch": 1.0,
            "removed": 0.0,
            "rebill": 0.0,
            "loop": 0.0,
            "tool": 0.0,
            "amount": 0.0,
            "distance": 6.0,
        }
    # reuse-aware deletion has no amount: about 60 % of the tool outputs go stale
    a = float(d.amount) / 100.0 if d.amount is not None else (0.6 if d.policy == "reuse" else 0.0)
    tool = 1.0 if d.scope in ("tool_output", "both") else 0.0
    reasoning = 1.0 if d.scope in ("reasoning", "both") else 0.0
    token = 1.3 if d.granularity == "token" else 1.0
    immediate = d.keep_last == 0
    solve = -(0.03 * a * tool + 0.01 * a * reasoning) * token
    if immediate:
        solve = -(0.35 * a * tool + 0.06 * a * reasoning) * token
    if d.scope == "both" and d.granularity == "turn" and a >= 1.0:
        solve -= 0.25
    turns = 1.0 + (0.55 * a * tool + 0.05 * a * reasoning) * token * (2.2 if immediate else 1.0)
    refetch = 1.0 + 5.0 * a * tool * token * (1.4 if immediate else 1.0) + 0.6 * a * reasoning * immediate
    removed = min(0.8, a * (0.55 * tool + 0.12 * reasoning))
    rebill = min(
        0.8, (0.02 + 0.1 * a) * (4.0 if d.granularity == "token" else 1.0) * (1.5 if immediate else 1.0)
    )
    if not tool:
        rebill *= 0.6
    loop = 0.1 * a * tool * immediate
    # policies beyond the paper: a longer delay softens every effect, batching and the cache
    # gate break the prefix less often, reuse-aware deletion drops what is rarely re-read
    if d.keep_last > 2:
        soften = 2.0 / d.keep_last
        solve *= soften
        turns = 1.0 + (turns - 1.0) * soften
        refetch = 1.0 + (refetch - 1.0) * soften
        removed *= 0.5 + 0.5 * soften
    if d.policy == "batch":
        rebill /= float(d.params.get("every", 1))
    elif d.policy == "gate":
        rebill *= 0.35
        removed *= 0.8
    elif d.policy == "reuse":
        refetch = 1.0 + (refetch - 1.0) * 0.3
        solve *= 0.5
    return {
        "solve": solve,
        "turns": turns,
        "refetch": refetch,
        "removed": removed,
        "rebill": rebill,
        "loop": loop,
        "tool": tool,
        "amount": a,
        "distance": 4.0 if immediate else 7.0,
    }


def synthetic_tables(
    runs: Iterable[Run],
    *,
    turn_cap: int = 200,
    with_calls: bool = False,
    profiles: Sequence[str] = ("paper",),
) -> dict[str, pa.Table]:
    """``runs``, ``tool_calls``, ``run_costs``, ``timings`` and (``with_calls``) ``calls`` tables."""
    p_in, p_cached, p_out = (p / 1e6 for p in PRICES)
    cols: dict[str, list] = {n: [] for n in RUNS_SCHEMA.names}
    tc: dict[str, list] = {n: [] for n in TOOL_CALLS_SCHEMA.names}
    costs: dict[str, list] = {n: [] for n in RUN_COSTS_SCHEMA.names}
    timings: dict[str, list] = {n: [] for n in TIMINGS_SCHEMA.names}
    calls: dict[str, list] = {n: [] for n in CALLS_SCHEMA.names}
    for k, run in enumerate(runs):
        rng = np.random.default_rng(run.seed)
        e = _effects(run)
        agent_f = 1.2 if run.agent == "trae" else 1.0
        p_task = 0.2 + 0.85 * _unit("solve", run.task)
        base_turns = (25 + 55 * _unit("turns", run.task)) * agent_f
        turns = int(min(turn_cap, max(3, round(base_turns * e["turns"] * math.exp(rng.normal(0, 0.3))))))
        capped = turns >= turn_cap
        looping = bool(rng.random() < 0.01 + e["loop"])
        resolved = bool(not capped and rng.random() < min(0.99, max(0.0, p_task + e["solve"])))
        per_turn = 900 + 600 * _unit("size", run.task)
        system = 3000.0
        prompt = int(turns * system + per_turn * turns * (turns + 1) / 2 * (1 - e["removed"]))
        new = int(turns * per_turn * (1 - 0.3 * e["removed"]))
        rebilled = int((prompt - new) * e["rebill"] * (0.8 + 0.4 * rng.random()))
        cached = prompt - new - rebilled
        output = int(turns * (750 + 250 * rng.random()) * (1 + 0.15 * e["amount"]))
        cost_flat = prompt * p_in + output * p_out
        cost_cached, cost_new, cost_rebilled, cost_output = (
            cached * p_cached,
            new * p_in,
            rebilled * p_in,
            output * p_out,
        )
        cost_cache = cost_cached + cost_new + cost_rebilled + cost_output
        n_tool = turns
        n_reads = int(rng.binomial(n_tool, 0.35))
        q = min(0.9, 0.06 * e["refetch"])
        refetch_flags = rng.random(n_reads) < q
        n_ref = int(refetch_flags.sum())
        n_del = round(n_reads * e["amount"] * e["tool"] * 0.9)
        n_kept = n_reads - n_del
        del_ref = int(rng.binomial(n_del, min(0.95, 0.06 * 3.0 * (1 + e["amount"])))) if n_del else 0
        kept_ref = int(rng.binomial(n_kept, 0.06)) if n_kept else 0
        read_turns = np.sort(rng.choice(np.arange(1, turns + 1), size=n_reads, replace=n_reads > turns))
        distances = 1 + rng.poisson(e["distance"], size=n_reads)
        per_turn_count: dict[int, int] = {}
        for t, is_ref, dist in zip(
            read_turns.tolist(), refetch_flags.tolist(), distances.tolist(), strict=True
        ):
            tc["run_id"].append(run.run_id)
            tc["turn"].append(int(t))
            tc["index"].append(per_turn_count.get(t, 0))
            per_turn_count[t] = per_turn_count.get(t, 0) + 1
            tc["tool"].append("bash")
            tc["summary"].append(f"cat file_{int(rng.integers(0, 40))}.py")
            tc["label"].append("read")
            tc["is_read"].append(True)
            tc["n_distinct_lines"].append(int(rng.integers(5, 200)))
            tc["is_refetch"].append(bool(is_ref))
            tc["overlap"].append(float(0.8 + 0.2 * rng.random()) if is_ref else float(0.5 * rng.random()))
            tc["refetch_distance"].append(int(dist) if is_ref else None)
            tc["was_deleted"].append(bool(is_ref and rng.random() < e["amount"] * e["tool"]))
        status = "capped" if capped else "submitted"
        row = {
            **run.identity(),
            "model_backend": "synthetic",
            "status": status,
            "exit_status": "LimitsExceeded" if capped else "Submitted",
            "turns": turns,
            "capped": capped,
            "looping": looping,
            "context_exceeded": False,
            "patch_missing": capped,
            "error": None,
            "eval_status": "resolved" if resolved else ("empty_patch" if capped else "unresolved"),
            "resolved": resolved,
            "n_tool_calls": n_tool,
            "n_reads": n_reads,
            "n_refetches": n_ref,
            "refetch_rate": n_ref / n_reads if n_reads else None,
            "n_refetches_deleted": min(n_ref, del_ref),
            "n_refetches_kept": max(0, n_ref - min(n_ref, del_ref)),
            "median_refetch_distance": float(np.median(distances[refetch_flags])) if n_ref else None,
            "n_outputs_deleted": n_del,
            "n_outputs_deleted_refetched": del_ref,
            "n_outputs_kept": n_kept,
            "n_outputs_kept_refetched": kept_ref,
            "prompt_tokens": prompt,
            "output_tokens": output,
            "cached_tokens": cached,
            "new_tokens": new,
            "rebilled_tokens": rebilled,
            "deleted_tokens": int(prompt * e["removed"] / max(1e-9, 1 - e["removed"])),
            "cost_flat": cost_flat,
            "cost_cache": cost_cache,
            "reported_cached_tokens": None,
            "prompt_checked_calls": 0,  # a synthetic server reports no usage
            "prompt_mismatch_calls": 0,
            "prompt_token_difference": 0,
            "cost_reported": None,
        }
        for name, value in row.items():
            cols[name].append(value)
        for profile in profiles:
            costs["run_id"].append(run.run_id)
            costs["profile"].append(profile)
            for name, value in (
                ("prompt_tokens", prompt),
                ("cached_tokens", cached),
                ("new_tokens", new),
                ("rebilled_tokens", rebilled),
                ("output_tokens", output),
                ("cost_cached", cost_cached),
                ("cost_new", cost_new),
                ("cost_rebilled", cost_rebilled),
                ("cost_cache_write", 0.0),
                ("cost_output", cost_output),
                ("cost_cache", cost_cache),
                ("cost_flat", cost_flat),
                ("calls", turns),
                ("cache_write_tokens", 0),
                ("reported_calls", 0),
                ("reported_cached_tokens", None),
                ("reconstructed_cached_tokens", None),
                ("cross_run_cached_tokens", None),
                ("cache_agreement", None),
                ("reported_prompt_tokens", None),
                ("reconstructed_prompt_tokens", None),
                ("reported_cache_write_tokens", None),
                ("cost_reported", None),
                ("cost_cache_on_reported", None),
            ):
                costs[name].append(value)
        timings["run_id"].append(run.run_id)
        timings["started"].append(1.7e9 + 60.0 * k)
        timings["wall_s"].append(turns * 4.0)
        timings["model_s"].append(turns * 2.5)
        timings["calls"].append(turns)
        if with_calls:
            shares = np.arange(1, turns + 1, dtype=float)
            shares /= shares.sum()
            for i in range(turns):
                calls["run_id"].append(run.run_id)
                calls["call"].append(i + 1)
                calls["n_messages"].append(2 + 2 * (i + 1))
                p_i, c_i = int(prompt * shares[i]), int(cached * shares[i])
                n_i, r_i, o_i = int(new / turns), int(rebilled * shares[i]), int(output / turns)
                calls["prompt_tokens"].append(p_i)
                calls["output_tokens"].append(o_i)
                calls["cached_tokens"].append(c_i)
                calls["new_tokens"].append(n_i)
                calls["rebilled_tokens"].append(r_i)
                calls["reported_cached_tokens"].append(None)
                calls["deleted_parts"].append(0)
                calls["deleted_tokens"].append(0)
                calls["prefix_tokens"].append(c_i)
                calls["cache_write_tokens"].append(0)
                calls["new_deleted_parts"].append(0)
                calls["new_deleted_tokens"].append(0)
                calls["finish_reason"].append("tool_calls")
                calls["cost_flat"].append(p_i * p_in + o_i * p_out)
                calls["cost_cache"].append(c_i * p_cached + (n_i + r_i) * p_in + o_i * p_out)
                for name in ("reported_prompt_tokens", "reported_cache_write_tokens", "prompt_mismatch",
                             "cost_reported"):
                    calls[name].append(None)
    out = {
        "runs": pa.table(cols, schema=RUNS_SCHEMA),
        "tool_calls": pa.table(tc, schema=TOOL_CALLS_SCHEMA),
        "run_costs": pa.table(costs, schema=RUN_COSTS_SCHEMA),
        "timings": pa.table(timings, schema=TIMINGS_SCHEMA),
    }
    out["calls"] = pa.table(calls, schema=CALLS_SCHEMA)
    return out
