"""Reference implementations, the definitions taken literally: for tests and benchmarks.

* :func:`naive_account` — every call's prompt materialized as a token list and compared
  with every earlier prompt, token by token; the new-message boundary from the block
  lengths; each profile's cache as a dictionary of stored prefixes (:func:`naive_cache`).
  Quadratic in calls and tokens by design: it is what :func:`forgetting.cost.accounting.account`
  must equal, not something to run at study scale.
"""

from __future__ import annotations

from collections.abc import Sequence

from forgetting.cost.accounting import CallAccount
from forgetting.cost.cache_model import CacheStep
from forgetting.cost.pricing import PricingProfile
from forgetting.cost.prompts import RunPrompts


def lcp_tokens(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def naive_prefixes(run: RunPrompts) -> list[tuple[int, int, int]]:
    """(prompt tokens, LCP with any earlier prompt, new-message boundary) per call."""
    prompts = [run.prompt_tokens(c) for c in run.calls]
    out = []
    max_positions = 0
    for i, call in enumerate(run.calls):
        p = prompts[i]
        best = 0
        for j in range(i):
            best = max(best, lcp_tokens(p, prompts[j]))
        boundary = len(run.store.tokens(call.blocks[: min(max_positions, call.n_positions)]))
        max_positions = max(max_positions, call.n_positions)
        out.append((len(p), best, boundary))
    return out


def _lattice(profile: PricingProfile, n: int) -> list[int]:
    first = profile.min_prefix if profile.min_prefix > 0 else profile.increment
    return list(range(first, n + 1, profile.increment))


def naive_cache(
    prompts: Sequence[Sequence[int]], clock: Sequence[float], profile: PricingProfile
) -> list[CacheStep]:
    """The cache model of :mod:`forgetting.cost.cache_model`, literally: a dictionary from
    every stored lattice prefix (as a tuple) to its last use."""
    store: dict[tuple[int, ...], float] = {}
    steps = []
    for p, now in zip(prompts, clock, strict=True):
        n = len(p)
        if profile.ttl_s is not None:
            store = {q: t for q, t in store.items() if now - t <= profile.ttl_s}
        lattice = _lattice(profile, n)
        m = max((lam for lam in lattice if tuple(p[:lam]) in store), default=0)
        hit = profile.round_hit(min(m, n - 1)) if profile.recompute_last_token else m
        steps.append(CacheStep(hit, profile.round_hit(n) - m))
        for lam in lattice:
            store[tuple(p[:lam])] = now
        if profile.capacity_tokens is not None:

            def owned(q: tuple[int, ...]) -> int:
                return len(q) - profile.round_hit(len(q) - 1)

            occupancy = sum(owned(q) for q in store)
            for q in sorted(store, key=lambda q: (store[q], -len(q))):
                if occupancy <= profile.capacity_tokens:
                    break
                occupancy -= owned(q)
                del store[q]
    return steps


def naive_account(run: RunPrompts, profiles: Sequence[PricingProfile]) -> list[CallAccount]:
    prefixes = naive_prefixes(run)
    prompts = [run.prompt_tokens(c) for c in run.calls]
    clock: list[float] = []
    for i, c in enumerate(run.calls):
        t = c.time if c.time is not None else float(i)
        clock.append(max(t, clock[-1]) if clock else t)
    per_profile = [
        naive_cache(prompts, clock if p.ttl_s is not None else [float(i) for i in range(len(prompts))], p)
        for p in profiles
    ]
    return [
        CallAccount(call.call, n, lcp, boundary, tuple(steps[i] for steps in per_profile))
        for i, (call, (n, lcp, boundary)) in enumerate(zip(run.calls, prefixes, strict=True))
    ]
