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
``amount`` in (0, 100] and ``keep_last`` ≥ 0 (or ``timing``), named
``{retention}-{granularity}-{scope}-{amount}``: ``keep8-turn-tool_output-100`` keeps the last 8
turns intact (:mod:`forgetting.deletion.names`). The helpers here (checked dimensions, per-turn
decisions, names) serve the policies built on this one (``batch``, ``gate``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from forgetting.deletion.draws import unit
from forgetting.deletion.names import (
    parse_retention,
    parse_selection,
    retention_word,
    selection_words,
    split_numbered,
)
from forgetting.deletion.policy import HistoryView, Policy, PolicyContext, Rewrite
from forgetting.deletion.settings import DeletionSettings
from forgetting.foundation.errors import ConfigError
from forgetting.grid import GRANULARITIES, SCOPES, TIMINGS, Deletion, timing_of

RANDOM_KEYS = ("name", "policy", "scope", "granularity", "amount", "keep_last", "timing")


def turn_selected(seed: int, turn: int, amount: float) -> bool:
    """Whether turn-level deletion at ``amount`` percent selects ``turn`` in this run."""
    return unit(seed, "turn", turn) < float(amount) / 100.0


def turn_rewrites(deletion: Deletion, seed: int, turn: int) -> tuple[Rewrite, ...]:
    """The paper's decision for one eligible turn: its scoped parts, or nothing."""
    amount = float(deletion.amount or 0.0)
    if deletion.granularity == "turn":
        if not turn_selected(seed, turn, amount):
            return ()
        return tuple(Rewrite(turn, part, "turn") for part in deletion.parts)
    return tuple(Rewrite(turn, part, "token", amount) for part in deletion.parts)


def check_keys(entry: Mapping[str, Any], allowed: Iterable[str], key: str, policy: str) -> None:
    allowed = tuple(allowed)
    unknown = sorted(set(entry) - set(allowed))
    if unknown:
        raise ConfigError(
            f"{key}.{unknown[0]}: unknown key for policy {policy!r}; allowed keys: {', '.join(allowed)}"
        )


#: the largest count a policy key takes (turns, calls): every count of a config is bounded
MAX_COUNT = 100_000


def integer(entry: Mapping[str, Any], field: str, key: str, minimum: int, maximum: int = MAX_COUNT) -> int:
    value = entry.get(field)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{key}.{field}: {value!r} must be an integer >= {minimum}")
    if value > maximum:
        raise ConfigError(f"{key}.{field}: {value!r} must be at most {maximum}")
    return value


def keep_last_of(entry: Mapping[str, Any], key: str) -> int:
    """``keep_last`` of an entry, given directly or as ``timing`` (``delayed`` 2, ``immediate`` 0)."""
    timing = entry.get("timing")
    if timing is not None and timing not in TIMINGS:
        raise ConfigError(f"{key}.timing: {timing!r} is not allowed; allowed values: {', '.join(TIMINGS)}")
    if "keep_last" in entry:
        keep_last = integer(entry, "keep_last", key, 0)
        if timing is not None and TIMINGS[timing] != keep_last:
            raise ConfigError(
                f"{key}.timing: {timing!r} means keep_last {TIMINGS[timing]}, but keep_last is {keep_last}; "
                "give one of the two"
            )
        return keep_last
    if timing is None:
        raise ConfigError(f"{key}: give keep_last (an integer >= 0) or timing ({', '.join(TIMINGS)})")
    return TIMINGS[timing]


def random_fields(entry: Mapping[str, Any], key: str) -> dict[str, Any]:
    """The paper's dimensions of an entry, checked: scope, granularity, amount, keep_last, timing."""
    scope, granularity = entry.get("scope"), entry.get("granularity")
    if scope not in SCOPES:
        raise ConfigError(f"{key}.scope: {scope!r} is not allowed; allowed values: {', '.join(SCOPES)}")
    if granularity not in GRANULARITIES:
        raise ConfigError(
            f"{key}.granularity: {granularity!r} is not allowed; allowed values: {', '.join(GRANULARITIES)}"
        )
    amount = entry.get("amount")
    if isinstance(amount, bool) or not isinstance(amount, int | float) or not 0 < amount <= 100:
        raise ConfigError(f"{key}.amount: {amount!r} must be a number in (0, 100]")
    keep_last = keep_last_of(entry, key)
    return {
        "scope": scope,
        "granularity": granularity,
        "amount": float(amount),
        "keep_last": keep_last,
        "timing": timing_of(keep_last),
    }


def random_words(deletion: Deletion) -> str:
    """``{retention}-{granularity}-{scope}-{amount}``."""
    return f"{retention_word(deletion.keep_last)}-" + selection_words(
        deletion.granularity, deletion.scope, deletion.amount
    )


def random_entry(words: list[str], name: str, key: str) -> dict[str, Any] | None:
    """The entry of ``{retention}-{granularity}-{scope}-{amount}``; None when ``words[0]`` is
    not a retention word."""
    keep_last = parse_retention(words[0], name, key) if words else None
    if keep_last is None:
        return None
    return {"keep_last": keep_last, **parse_selection(words[1:], name, key)}


def retention_label(keep_last: int) -> str:
    timing = timing_of(keep_last)
    return timing if timing is not None else f"keep {keep_last}"


class RandomDeletion(Policy):
    name = "random"
    name_scheme = "{retention}-{granularity}-{scope}-{amount}"

    def __init__(self, deletion: Deletion, settings: DeletionSettings) -> None:
        super().__init__(deletion, settings)
        self._turns: dict[tuple[int, int], tuple[Rewrite, ...]] = {}  # (seed, turn) → its rewrites

    def _turn(self, seed: int, turn: int) -> tuple[Rewrite, ...]:
        rewrites = self._turns.get((seed, turn))
        if rewrites is None:
            rewrites = self._turns[seed, turn] = turn_rewrites(self.deletion, seed, turn)
        return rewrites

    def decide(self, view: HistoryView) -> list[Rewrite]:
        out: list[Rewrite] = []
        for turn in view.eligible(self.deletion.keep_last):
            out += self._turn(view.seed, turn)
        return out

    @classmethod
    def configure(cls, entry: Mapping[str, Any], key: str, context: PolicyContext) -> Deletion:
        check_keys(entry, RANDOM_KEYS, key, cls.name)
        d = Deletion(name="", policy=cls.name, **random_fields(entry, key))
        return cls.named(d, entry)

    @classmethod
    def canonical_name(cls, deletion: Deletion) -> str:
        return random_words(deletion)

    @classmethod
    def name_entry(cls, name: str, key: str) -> dict[str, Any] | None:
        words = name.split("-")
        if len(words) != 4:
            return None
        entry = random_entry(words, name, key)
        return None if entry is None else {"policy": cls.name, **entry}

    @classmethod
    def label(cls, entry: Mapping[str, Any]) -> str:
        return retention_label(int(entry.get("keep_last", 0)))

    @classmethod
    def numbered_entry(
        cls, name: str, key: str, *, optional: bool = False
    ) -> tuple[int | None, dict[str, Any]] | None:
        """A name ``{policy}{n}-{retention}-{granularity}-{scope}-{amount}`` of a policy that adds
        a number to the paper's words (batch, gate): that number and the entry the words stand
        for; None when the name is not of this policy; ConfigError when it is a malformed one."""
        parsed = split_numbered(name, cls.name, optional=optional)
        if parsed is None:
            return None
        n, words = parsed
        entry = random_entry(words, name, key) if len(words) == 4 else None
        if entry is None:
            raise ConfigError(f"{key}: {name!r} is not a {cls.name} name; expected {cls.name_scheme}")
        return n, entry
