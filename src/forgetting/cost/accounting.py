"""Per-call token accounting (SPEC §5): prompt, cached, new, re-billed and output tokens.

For call *i* with prompt ``P`` (``n`` tokens) the profile's cache gives ``hit`` tokens at
the cached price (the paper: ``hit`` = LCP of ``P`` with any earlier prompt). The rest is
split at the **new-message boundary** ``B``:

* message *positions* are the blocks of a prompt in order (the implicit tools system
  block, then one per message); ``M`` = the most positions any earlier call sent;
* ``B`` = the tokens of ``P``'s first ``min(M, positions of P)`` blocks. Everything from
  ``B`` on — the blocks at positions never sent before, then the generation prompt
  ``<|im_start|>assistant\\n`` — is *new* in this call;
* ``cached = hit``; ``rebilled = max(0, B − hit)`` (content at old positions the cache did
  not serve: a rewritten turn and everything after it up to ``B``);
  ``new = n − max(hit, B)``. So ``cached + new + rebilled = n``, each ≥ 0.

Append-only histories (the baseline) have zero re-billed tokens under the paper's model:
the earlier prompt with ``M`` positions is a prefix of ``P`` block for block, so
``LCP ≥ B``. A hit that reaches past ``B`` (the last prompt's generation prompt equals
the head of the assistant block that follows it) counts as cached, not new. Under a
profile that rounds hits down (blocks, minimum prefix) or loses entries (TTL, LRU), the
tokens between the hit and ``B`` are re-billed: sent before, billed at full price again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from forgetting.cost.cache_model import CacheState, CacheStep, stateless_step
from forgetting.cost.prefix_tree import PrefixTree
from forgetting.cost.pricing import PricingProfile
from forgetting.cost.prompts import RunPrompts
from forgetting.foundation.errors import RunOutputError


@dataclass(frozen=True)
class CallAccount:
    call: int
    prompt_tokens: int
    prefix_tokens: int  # LCP with any earlier prompt (the paper's cached tokens)
    boundary: int  # B: tokens at message positions sent before
    steps: tuple[CacheStep, ...]  # one per profile, in the order given


def split(n: int, hit: int, boundary: int) -> tuple[int, int, int]:
    """(cached, new, rebilled) of a prompt of ``n`` tokens."""
    return hit, n - max(hit, boundary), max(0, boundary - hit)


def account(run: RunPrompts, profiles: Sequence[PricingProfile]) -> list[CallAccount]:
    """Walk a run's calls in order: LCP and boundary per call, hits and writes per profile."""
    stateful = [i for i, p in enumerate(profiles) if p.needs_cache_state]
    if any(profiles[i].ttl_s is not None for i in stateful) and not run.has_times:
        name = next(profiles[i].name for i in stateful if profiles[i].ttl_s is not None)
        raise RunOutputError(
            f"{run.source}: pricing profile {name!r} expires cache entries (ttl_s) but the run has no "
            "timestamps for every call"
        )
    tree = PrefixTree(run.store, slots=len(stateful))
    states = {i: CacheState(profiles[i], tree, slot) for slot, i in enumerate(stateful)}
    max_positions = 0
    clock = float("-inf")
    out: list[CallAccount] = []
    for index, call in enumerate(run.calls):
        ins = tree.insert(call.blocks)
        n, lcp, path = ins.tokens, ins.lcp, ins.path
        boundary = int(ins.offsets[min(max_positions, call.n_positions)])
        max_positions = max(max_positions, call.n_positions)
        if call.time is not None:
            clock = max(clock, call.time)  # a clock that steps back (skew) is held, not rewound
        steps = []
        for i, profile in enumerate(profiles):
            if i in states:
                now = clock if profile.ttl_s is not None else float(index)
                steps.append(states[i].step(n, lcp, path, now))
            else:
                steps.append(stateless_step(profile, n, lcp))
        out.append(CallAccount(call.call, n, lcp, boundary, tuple(steps)))
    return out
