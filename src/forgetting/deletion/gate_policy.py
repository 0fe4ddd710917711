"""A cache-aware gate: rewrite the history only when the saving pays for breaking the cache.

The gate wraps the paper's random deletion (same ``scope``, ``granularity``, ``amount``,
``keep_last`` and keyed draws). The paper's policy decides *which* parts go; the gate decides
*when*. At each call it looks at the *pending* rewrites (decided by the paper's policy but
not yet made) and makes all of them at once when

    H · D · p_cached  >  R · (p_write − p_cached)

* ``D``: tokens the pending rewrites remove from every later prompt (per message: its
  deletable tokens minus the placeholder's, or the token-level share removed);
* ``H``: calls expected from this one on, itself included: ``turn_cap − n`` for a history of
  ``n`` turns (call ``n + 1``), or at most ``horizon`` when one is configured;
* ``R``: tokens re-billed by rewriting now: the previous prompt's tokens from the first
  message a pending rewrite touches to its end, after the rewrite (they were cached and are
  now billed, and written, again);
* ``p_cached``, ``p_write``: the pricing profile's cached-input and cache-write prices
  (``cache_write`` defaults to ``input``), read from ``resources/pricing`` when the config
  is loaded and kept in the configuration's parameters. Only the prices are used, not a
  profile's cache rules (minimum prefix, expiry).

Without a rewrite the removable tokens stay cached (``D · p_cached`` per call, ``H`` calls);
with it the suffix after the first rewritten message is billed at ``p_write`` instead of
``p_cached`` once. Token counts are those of the messages' texts and tool-call arguments
(the model's tokenizer; the chat template's few tokens per message are left out).

A rewrite once made is permanent (stability): the decision is a fold over the calls of the
run (which rewrites were committed after each history length), a pure function of the
history, memoized per run and redone from the first turn that differs from the last call's.

Config entry: ``policy: gate``, the ``random`` keys, optional ``horizon`` (calls, ≥ 1;
default: to the turn cap) and ``pricing`` (a profile name; default ``pricing.primary``).
Name: ``gate-{retention}-{granularity}-{scope}-{amount}`` (to the turn cap) or
``gate{H}-…`` (horizon ``H``), e.g. ``gate10-delayed-turn-tool_output-100``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import forgetting.deletion.random_policy as random_policy
from forgetting.cost.pricing import load_profiles
from forgetting.deletion.parts import text_slots
from forgetting.deletion.policy import HistoryView, PolicyContext, Rewrite
from forgetting.deletion.settings import DeletionSettings
from forgetting.foundation.errors import ConfigError, UserError
from forgetting.grid import Deletion


class Prices(NamedTuple):
    """Per million tokens; only their ratios matter to the gate."""

    cached_input: float
    cache_write: float


@dataclass(frozen=True)
class GateEstimate:
    """The gate's arithmetic at one call (a history of ``n_turns`` turns)."""

    n_turns: int
    remaining: int  # H
    saved_tokens: int  # D
    rebilled_tokens: int  # R
    saving: float  # H · D · p_cached
    cost: float  # R · (p_write − p_cached)

    @property
    def fires(self) -> bool:
        return self.saved_tokens > 0 and self.saving > self.cost


def remaining_calls(n_turns: int, turn_cap: int, horizon: int | None) -> int:
    """H: calls from call ``n_turns + 1`` to the turn cap, itself included, at most ``horizon``."""
    left = max(0, turn_cap - n_turns)
    return left if horizon is None else min(left, horizon)


def estimate(
    n_turns: int, saved_tokens: int, rebilled_tokens: int, *, turn_cap: int, horizon: int | None, prices: Prices
) -> GateEstimate:
    h = remaining_calls(n_turns, turn_cap, horizon)
    return GateEstimate(
        n_turns=n_turns,
        remaining=h,
        saved_tokens=saved_tokens,
        rebilled_tokens=rebilled_tokens,
        saving=h * saved_tokens * prices.cached_input,
        cost=rebilled_tokens * (prices.cache_write - prices.cached_input),
    )


class _Sizes:
    """Token sizes of one history's messages and of what each rewrite removes from them."""

    def __init__(self, view: HistoryView, settings: DeletionSettings) -> None:
        self.view = view
        self.settings = settings
        self._tokens: dict[int, int] = {}
        self._removed: dict[tuple[Rewrite, int], int] = {}

    def message(self, i: int) -> int:
        n = self._tokens.get(i)
        if n is None:
            msg = self.view.messages[i]
            n = sum(self.view.count(t) for _, t in text_slots(msg, msg.get("role") == "assistant"))
            if msg.get("tool_calls"):
                n += self.view.count(json.dumps(msg["tool_calls"], sort_keys=True, ensure_ascii=False))
            self._tokens[i] = n
        return n

    def removed(self, rw: Rewrite, i: int) -> int:
        """Tokens ``rw`` removes from message ``i`` (0 when it has nothing to delete)."""
        key = (rw, i)
        n = self._removed.get(key)
        if n is None:
            ed = self.view.editable(i, rw.part)
            if ed is None:
                n = 0
            else:
                before = sum(self.view.count(c) for c in ed.cores)
                if rw.mode == "turn":
                    text = rw.placeholder or self.settings.placeholders[rw.part]
                    lines = sum(c.count("\n") + 1 for c in ed.cores)
                    text = text.replace("{lines}", str(lines)).replace("{tokens}", str(before))
                    n = before - self.view.count(text)
                else:
                    n = int(before * float(rw.amount or 0) / 100 + 0.5)
            self._removed[key] = n
        return n

    def touched(self, rw: Rewrite) -> list[int]:
        """The messages ``rw`` rewrites (those with something to delete)."""
        return [
            i
            for i in self.view.message_indices(rw.turn, rw.part)
            if self.view.editable(i, rw.part) is not None
        ]


class CacheAwareGate(random_policy.RandomDeletion):
    name = "gate"
    name_scheme = "gate[{H}]-{retention}-{granularity}-{scope}-{amount}"

    def __init__(self, deletion: Deletion, settings: DeletionSettings) -> None:
        super().__init__(deletion, settings)
        p = deletion.params
        self.turn_cap = int(p["turn_cap"])
        self.horizon = None if p.get("horizon") is None else int(p["horizon"])
        self.prices = Prices(float(p["cached_input"]), float(p["cache_write"]))
        self._seed: int | None = None
        self._keys: list[tuple[Any, ...]] = []  # per turn, as of the last history folded
        self._steps: list[tuple[frozenset[Rewrite], GateEstimate | None]] = []  # after each turn

    def _candidates(self, seed: int, n_turns: int) -> list[Rewrite]:
        out: list[Rewrite] = []
        for turn in range(1, max(0, n_turns - self.deletion.keep_last) + 1):
            out += self._turn(seed, turn)
        return out

    def _step(
        self, sizes: _Sizes, m: int, committed: frozenset[Rewrite]
    ) -> tuple[frozenset[Rewrite], GateEstimate | None]:
        """The fold at a history of ``m`` turns: what is committed after it, and the arithmetic."""
        candidates = self._candidates(sizes.view.seed, m)
        pending = [rw for rw in candidates if rw not in committed]
        if not pending:
            return committed, None
        end = sizes.view.turn(m).assistant  # the previous prompt is messages[:end]
        saved = 0
        start = end
        for rw in pending:
            for i in sizes.touched(rw):
                saved += sizes.removed(rw, i)
                start = min(start, i)
        rebilled = 0
        if start < end:
            rebilled = sum(sizes.message(i) for i in range(start, end))
            for rw in (*committed, *pending):
                rebilled -= sum(sizes.removed(rw, i) for i in sizes.touched(rw) if start <= i < end)
        est = estimate(
            m, saved, max(0, rebilled), turn_cap=self.turn_cap, horizon=self.horizon, prices=self.prices
        )
        return (frozenset(candidates) if est.fires else committed), est

    def _turn_key(self, view: HistoryView, turn: int) -> tuple[Any, ...]:
        t = view.turn(turn)
        return (t.assistant, t.observations, *(view.messages[i] for i in (t.assistant, *t.observations)))

    def fold(self, view: HistoryView) -> list[tuple[frozenset[Rewrite], GateEstimate | None]]:
        """Committed rewrites and the gate's estimate after each history length 1 … n."""
        if self._seed != view.seed:
            self._seed, self._keys, self._steps = view.seed, [], []
        keys = [self._turn_key(view, t) for t in range(1, view.n_turns + 1)]
        same = 0
        while same < min(len(keys), len(self._keys)) and keys[same] == self._keys[same]:
            same += 1
        self._keys = keys
        del self._steps[same:]
        sizes = _Sizes(view, self.settings)
        committed = self._steps[-1][0] if self._steps else frozenset()
        for m in range(same + 1, view.n_turns + 1):
            committed, est = self._step(sizes, m, committed)
            self._steps.append((committed, est))
        return list(self._steps[: view.n_turns])

    def decide(self, view: HistoryView) -> list[Rewrite]:
        steps = self.fold(view)
        return sorted(steps[-1][0]) if steps else []

    @classmethod
    def configure(cls, entry: Mapping[str, Any], key: str, context: PolicyContext) -> Deletion:
        random_policy.check_keys(entry, (*random_policy.RANDOM_KEYS, "horizon", "pricing"), key, cls.name)
        horizon = random_policy.integer(entry, "horizon", key, 1) if entry.get("horizon") is not None else None
        pricing = str(entry.get("pricing") or context.pricing_primary)
        try:
            (profile,) = load_profiles(context.pricing_dir, [pricing])
        except UserError as exc:
            raise ConfigError(f"{key}.pricing: {exc}") from None
        params = {
            "horizon": horizon,
            "turn_cap": context.turn_cap,
            "pricing": profile.name,
            "input": profile.input,
            "cached_input": profile.cached_input,
            "cache_write": profile.cache_write,
        }
        d = Deletion(name="", policy=cls.name, **random_policy.random_fields(entry, key), params=params)
        return cls.named(d, entry)

    @classmethod
    def canonical_name(cls, deletion: Deletion) -> str:
        horizon = deletion.params.get("horizon")
        return f"gate{'' if horizon is None else horizon}-{random_policy.random_words(deletion)}"

    @classmethod
    def name_entry(cls, name: str, key: str) -> dict[str, Any] | None:
        found = cls.numbered_entry(name, key, optional=True)
        if found is None:
            return None
        horizon, entry = found
        return {"policy": cls.name, **({"horizon": horizon} if horizon is not None else {}), **entry}

    @classmethod
    def label(cls, entry: Mapping[str, Any]) -> str:
        h = entry.get("horizon")
        over = "to the turn cap" if h is None else f"{h} calls"
        return f"cache gate, {over} · {random_policy.retention_label(int(entry.get('keep_last', 0)))}"


def committed_after(steps: Sequence[tuple[frozenset[Rewrite], GateEstimate | None]]) -> list[int]:
    """History lengths at which the gate rewrote (for tests and diagnostics)."""
    return [m for m, (_, est) in enumerate(steps, start=1) if est is not None and est.fires]
