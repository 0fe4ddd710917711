"""The paper's policy (SPEC §2): random turn-level or token-level deletion of old turns.

* eligible turns: all but the most recent ``keep_last``;
* ``granularity: turn``, X %: each eligible turn is selected when the draw keyed by
  (run seed, ``"turn"``, turn index) is below X/100; a selected turn has every scoped part
  replaced by its placeholder. The key holds neither the call nor the scope, so a turn's
  fate never changes between calls, and ``both`` selects the same turns as each single
  scope would;
* ``granularity: token``, X %: every eligible turn has X % of each scoped part's tokens
  removed (the draw itself, keyed by turn, part and message, is the engine's).

Besides the paper's 42 (:mod:`forgetting.grid`), a config may define others under
``configurations.policies`` with ``policy: random`` and any ``scope``, ``granularity``,
``amount`` in (0, 100] and ``keep_last`` ≥ 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from forgetting.deletion import draws
from forgetting.deletion.policy import HistoryView, Policy, Rewrite, register
from forgetting.deletion.settings import DeletionSettings
from forgetting.errors import ConfigError
from forgetting.grid import GRANULARITIES, SCOPES, TIMINGS, Deletion

_KEYS = ("name", "policy", "scope", "granularity", "amount", "keep_last", "timing")


def turn_selected(seed: int, turn: int, amount: float) -> bool:
    """Whether turn-level deletion at ``amount`` percent selects ``turn`` in this run."""
    return draws.unit(seed, "turn", turn) < float(amount) / 100.0


@register
class RandomDeletion(Policy):
    name = "random"

    def __init__(self, deletion: Deletion, settings: DeletionSettings) -> None:
        super().__init__(deletion, settings)
        self._turns: dict[tuple[int, int], tuple[Rewrite, ...]] = {}  # (seed, turn) → its rewrites

    def _turn(self, seed: int, turn: int) -> tuple[Rewrite, ...]:
        d = self.deletion
        amount = float(d.amount or 0.0)
        if d.granularity == "turn":
            if not turn_selected(seed, turn, amount):
                return ()
            return tuple(Rewrite(turn, part, "turn") for part in d.parts)
        return tuple(Rewrite(turn, part, "token", amount) for part in d.parts)

    def decide(self, view: HistoryView) -> list[Rewrite]:
        out: list[Rewrite] = []
        for turn in view.eligible(self.deletion.keep_last):
            rewrites = self._turns.get((view.seed, turn))
            if rewrites is None:
                rewrites = self._turns[view.seed, turn] = self._turn(view.seed, turn)
            out += rewrites
        return out

    @classmethod
    def configure(cls, entry: Mapping[str, Any], key: str) -> Deletion:
        unknown = sorted(set(entry) - set(_KEYS))
        if unknown:
            raise ConfigError(
                f"{key}.{unknown[0]}: unknown key for policy 'random'; allowed keys: {', '.join(_KEYS)}"
            )
        scope, granularity = entry.get("scope"), entry.get("granularity")
        if scope not in SCOPES:
            raise ConfigError(f"{key}.scope: {scope!r} is not allowed; allowed values: {', '.join(SCOPES)}")
        if granularity not in GRANULARITIES:
            raise ConfigError(
                f"{key}.granularity: {granularity!r} is not allowed; "
                f"allowed values: {', '.join(GRANULARITIES)}"
            )
        amount = entry.get("amount")
        if isinstance(amount, bool) or not isinstance(amount, int | float) or not 0 < amount <= 100:
            raise ConfigError(f"{key}.amount: {amount!r} must be a number in (0, 100]")
        if "keep_last" in entry:
            keep_last = entry["keep_last"]
            if isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 0:
                raise ConfigError(f"{key}.keep_last: {keep_last!r} must be an integer >= 0")
        elif entry.get("timing") in TIMINGS:
            keep_last = TIMINGS[entry["timing"]]
        else:
            raise ConfigError(f"{key}: give keep_last (an integer >= 0) or timing ({', '.join(TIMINGS)})")
        timing = entry.get("timing") or ("immediate" if keep_last == 0 else "delayed")
        if timing not in TIMINGS:
            raise ConfigError(
                f"{key}.timing: {timing!r} is not allowed; allowed values: {', '.join(TIMINGS)}"
            )
        return Deletion(
            name=str(entry["name"]),
            policy=cls.name,
            scope=scope,
            granularity=granularity,
            amount=float(amount),
            keep_last=int(keep_last),
            timing=timing,
        )
