"""How long a batch job holds its GPU: the throughput model of docs/cluster.md, in code.

The figures are stated assumptions, not measurements (the machines this pipeline was built
on have no GPU): :class:`Throughput` holds each with its meaning. From them, per run of ``n``
model calls, whose prompt starts at ``start_tokens`` and grows ``growth_tokens`` per call (so
prefill work grows with the square of the calls):

* mean prompt ``P = start + growth·(n−1)/2`` tokens;
* GPU work ``G = n·P·u / r_p + n·O / r_d`` seconds (uncached prefill plus decode);
* wall time ``L = n·(O / r_stream + P·u / r_p + t)`` seconds.

A batch of ``B`` runs, ``c`` at a time, takes ``max(B·G, ⌈B/c⌉·L) + L + S``: GPU-bound or
latency-bound, a tail of about one run with the GPU partly idle, and the server's own life
``S``. *Typical* is ``n = typical_calls``; the *worst case* is every run at the call cap
(``agent.turn_cap``, or fewer where ``model.vllm.max_model_len`` ends a run first). The
``run_batch`` job's time limit is the worst case (``execution.batch_runtime_min`` overrides it),
at most ``execution.batch_runtime_limit_min``; ``forgetting plan`` prints the GPU-hours as the
range typical–worst.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from forgetting.foundation.wording import counted
from forgetting.study.config import Study


@dataclass(frozen=True)
class Throughput:
    """The throughput model's assumptions (docs/cluster.md, *GPU time*)."""

    #: model calls of a typical run (the mean; the cap is ``agent.turn_cap``)
    typical_calls: int = 40
    #: prompt tokens of a run's first call (system prompt, task)
    start_tokens: int = 2_000
    #: prompt tokens added per call (the reply and the tool output appended to the history)
    growth_tokens: int = 1_100
    #: share of prompt tokens not served from vLLM's prefix cache (deletion rewrites old turns)
    uncached_share: float = 0.25
    #: output tokens per call
    output_tokens: int = 400
    #: seconds of tool execution and agent overhead per call
    tool_s: float = 4.0
    #: prefill tokens per second of Qwen3-Coder-30B-A3B on one GH200 (3 B active parameters, bf16)
    prefill_per_s: float = 15_000.0
    #: decode tokens per second, aggregate over the batch's streams
    decode_per_s: float = 1_500.0
    #: decode tokens per second of one stream
    stream_decode_per_s: float = 95.0
    #: minutes of one server's life outside the runs: job start, loading the weights,
    #: compilation and CUDA graph capture, shutdown
    server_min: float = 6.0


THROUGHPUT = Throughput()


@dataclass(frozen=True)
class RunCost:
    calls: int
    mean_prompt: float
    gpu_s: float
    wall_s: float


def run_cost(calls: int, t: Throughput = THROUGHPUT) -> RunCost:
    """The model's per-run figures for a run of ``calls`` model calls."""
    mean_prompt = t.start_tokens + t.growth_tokens * (calls - 1) / 2
    prefill_s = calls * mean_prompt * t.uncached_share / t.prefill_per_s
    gpu_s = prefill_s + calls * t.output_tokens / t.decode_per_s
    wall_s = calls * (t.output_tokens / t.stream_decode_per_s + mean_prompt * t.uncached_share / t.prefill_per_s
                      + t.tool_s)
    return RunCost(calls, mean_prompt, gpu_s, wall_s)


def batch_minutes(runs: int, concurrency: int, calls: int, t: Throughput = THROUGHPUT) -> float:
    """Minutes one batch of ``runs`` runs of ``calls`` calls each holds its GPU."""
    cost = run_cost(calls, t)
    busy_s = max(runs * cost.gpu_s, math.ceil(runs / concurrency) * cost.wall_s)
    return (busy_s + cost.wall_s) / 60 + t.server_min


def max_model_len(study: Study) -> int:
    return study.model.max_model_len


def worst_calls(study: Study, t: Throughput = THROUGHPUT) -> int:
    """The most calls a run makes: ``agent.turn_cap``, or the call whose prompt would pass
    ``max_model_len`` (the run then ends ``context_exceeded``)."""
    cap = int(study.agent.turn_cap)
    fits = 1 + max(0, (max_model_len(study) - t.start_tokens) // t.growth_tokens)
    return max(1, min(cap, fits))


@dataclass(frozen=True)
class BatchTime:
    runs: int
    typical_min: float
    worst_min: float


def batch_time(study: Study, runs: int, t: Throughput = THROUGHPUT) -> BatchTime:
    concurrency = int(study.plan.concurrency)
    typical = batch_minutes(runs, concurrency, min(t.typical_calls, worst_calls(study, t)), t)
    return BatchTime(runs, typical, batch_minutes(runs, concurrency, worst_calls(study, t), t))


def batch_runtime_min(study: Study, runs: int) -> int:
    """The ``run_batch`` job's time limit for a batch of ``runs`` runs: ``execution.batch_runtime_min``
    where given, else its worst case, at most ``execution.batch_runtime_limit_min``."""
    plan = study.plan
    if plan.batch_runtime_min:  # optional: derived
        return plan.batch_runtime_min
    return min(plan.batch_runtime_limit_min, math.ceil(batch_time(study, runs).worst_min))


def gpus_per_job(study: Study) -> int:
    return int(study.model.tensor_parallel_size)


@dataclass(frozen=True)
class StudyTime:
    batches: int
    gpus_per_job: int
    typical_gpu_h: float
    worst_gpu_h: float
    #: the longest batch's worst case and the limit its job gets
    worst_batch_min: float
    limit_min: int
    over_limit: int


def study_time(study: Study, batch_sizes: Sequence[int]) -> StudyTime:
    times = [batch_time(study, n) for n in batch_sizes]
    gpus = gpus_per_job(study)
    limit = int(study.plan.batch_runtime_limit_min)
    return StudyTime(
        batches=len(times),
        gpus_per_job=gpus,
        typical_gpu_h=sum(b.typical_min for b in times) / 60 * gpus,
        worst_gpu_h=sum(b.worst_min for b in times) / 60 * gpus,
        worst_batch_min=max((b.worst_min for b in times), default=0.0),
        limit_min=max((batch_runtime_min(study, n) for n in batch_sizes), default=limit),
        over_limit=sum(1 for b in times if b.worst_min > batch_runtime_min(study, b.runs)),
    )


def plan_lines(study: Study, batch_sizes: Sequence[int]) -> list[str]:
    """What ``forgetting plan`` prints about GPU time (model.backend vllm only)."""
    if study.model.backend != "vllm" or not batch_sizes:
        return []
    s = study_time(study, batch_sizes)
    typical = [batch_time(study, n).typical_min for n in batch_sizes]
    lines = [
        f"GPU time: {counted(s.batches, 'batch job')} × {s.gpus_per_job} GPU: "
        f"{s.typical_gpu_h:,.0f}–{s.worst_gpu_h:,.0f} "
        f"GPU-hours (typical: {THROUGHPUT.typical_calls} calls per run, {max(typical):.0f} min per batch; "
        f"worst case: every run at {worst_calls(study)} calls, {s.worst_batch_min:.0f} min; docs/cluster.md)",
        f"time limit per batch job: {s.limit_min} min " + (
            "(execution.batch_runtime_min)" if study.plan.batch_runtime_min
            else "(derived from the worst case, at most execution.batch_runtime_limit_min)"),
    ]
    if s.over_limit:
        lines.append(
            f"note: {counted(s.over_limit, 'batch', 'batches')} could pass their time limit in the worst case; "
            "such a job is ended at the limit and resubmitted (retries), keeping its finished runs"
        )
    return lines
