"""The prompt-cache model every pricing profile is an instance of.

Positions and prefixes: the cache holds *prefixes* of earlier prompts. Only prefixes
whose length lies on the profile's lattice ``Λ = {n0, n0+K, n0+2K, …}`` (``n0`` =
``min_prefix``, or ``K`` = ``increment`` when ``min_prefix`` is 0) can be stored or hit;
``r(L)`` is the longest lattice length ≤ L (0 when none). A stored prefix of length λ
*owns* the ``λ − prev(λ)`` tokens after the previous lattice length, so a cache holding
every prefix of one prompt of L tokens holds ``r(L)`` tokens.

Call *i* (prompt ``P``, ``|P| = n``, at time ``t``):

1. ``m`` = the longest stored lattice prefix of ``P`` still live at ``t`` (0 if none).
2. hit = ``m``; with ``recompute_last_token`` (vLLM) hit = ``r(min(m, n − 1))``: a full
   hit still recomputes the last token, losing that block.
3. written = ``r(n) − m``: the lattice prefixes of ``P`` the cache did not hold.
4. Every lattice prefix of ``P`` up to ``r(n)`` is stored or refreshed with last use ``t``.
5. ``ttl_s``: a prefix is live while ``t − last use ≤ ttl_s`` (refreshed on every use, as
   providers do). ``capacity_tokens``: after each call, least-recently-used prefixes are
   evicted (ties: longest first) until the owned tokens fit.

Without ``ttl_s`` and ``capacity_tokens`` nothing is ever lost, so ``m = r(LCP)`` where
LCP is the prompt's longest common prefix with any earlier prompt — the paper's model is
``Λ`` = every length, i.e. hit = LCP. With them, each node of the
:class:`~forgetting.cost.prefix_tree.PrefixTree` keeps its edge's coverage as a short list
``[(extent, last use)]`` (extents ascending, times descending: using a prefix uses all
its shorter prefixes, so last use never grows with depth); a call reads and refreshes
only the nodes on its own path, pruning and eviction scan the tree's ≤ 2 nodes per call.

Clock: the logged request times (call log) or response times (trajectory), made
non-decreasing; a profile without ``ttl_s`` orders calls by index and needs no times.
"""

from __future__ import annotations

from dataclasses import dataclass

from forgetting.cost.prefix_tree import Node, PrefixTree
from forgetting.cost.pricing import PricingProfile


@dataclass(frozen=True)
class CacheStep:
    hit: int  # prompt tokens billed at the cached price
    written: int  # prompt tokens newly written to the cache


def stateless_step(profile: PricingProfile, n: int, lcp: int) -> CacheStep:
    """A profile without expiry or eviction: ``m = r(LCP)``."""
    m = profile.round_hit(lcp)
    hit = profile.round_hit(min(m, n - 1)) if profile.recompute_last_token else m
    return CacheStep(hit, profile.round_hit(n) - m)


class CacheState:
    """The cache of one profile with expiry and/or a capacity, over a shared prefix tree."""

    def __init__(self, profile: PricingProfile, tree: PrefixTree, slot: int) -> None:
        self.profile = profile
        self.tree = tree
        self.slot = slot

    def step(self, n: int, lcp: int, path: list[Node], now: float) -> CacheStep:
        p, s = self.profile, self.slot
        if p.ttl_s is not None:
            self._expire(now - p.ttl_s)
        live = 0
        for node in path:
            cov = node.cov[s]
            if node.start >= lcp or not cov:
                break
            extent = cov[-1][0]
            live = min(extent, lcp)
            if extent < node.end:
                break
        m = p.round_hit(live)
        hit = p.round_hit(min(m, n - 1)) if p.recompute_last_token else m
        stored = p.round_hit(n)
        for node in path:
            if node.start >= stored:
                break
            e = min(node.end, stored)
            rest = [(e2, t2) for e2, t2 in node.cov[s] if e2 > e]
            node.cov[s] = rest if rest and rest[0][1] >= now else [(e, now), *rest]
        if p.capacity_tokens is not None:
            self._evict(p.capacity_tokens)
        return CacheStep(hit, stored - m)

    def _expire(self, threshold: float) -> None:
        s = self.slot
        for node in self.tree.nodes:
            cov = node.cov[s]
            if cov and cov[-1][1] < threshold:
                node.cov[s] = [(e, t) for e, t in cov if t >= threshold]

    def occupancy(self) -> int:
        r, s = self.profile.round_hit, self.slot
        total = 0
        for node in self.tree.nodes:
            lo = node.start
            for e, _ in node.cov[s]:
                total += r(e) - r(lo)
                lo = e
        return total

    def _evict(self, capacity: int) -> None:
        excess = self.occupancy() - capacity
        if excess <= 0:
            return
        r, s = self.profile.round_hit, self.slot
        segments = []
        for node in self.tree.nodes:
            lo = node.start
            for k, (e, t) in enumerate(node.cov[s]):
                segments.append((t, -e, k, lo, node))
                lo = e
        segments.sort(key=lambda seg: (seg[0], seg[1]))
        for t, neg_hi, k, lo, node in segments:
            hi = -neg_hi
            gain = r(hi) - r(lo)
            new_hi = lo if gain <= excess else max(lo, r(r(hi) - excess))
            excess -= r(hi) - r(new_hi)
            cov = node.cov[s]
            # segments of a node are visited deepest first, so index k is still valid
            if new_hi <= lo:
                del cov[k]
            else:
                cov[k] = (new_hi, t)
            if excess <= 0:
                return
