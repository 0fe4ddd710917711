"""The study grid of SPEC §1: deletion configurations and their stable names.

A configuration name reads ``{timing}-{granularity}-{scope}-{amount}``, e.g.
``delayed-turn-tool_output-50`` or ``immediate-token-both-25``; the uncompressed
reference is ``baseline``. The paper's grid is 3 scopes × 7 (granularity, amount) ×
2 timings = 42 configurations. Policies beyond the paper (longer delays, batching,
masking, …) are :class:`Deletion` values too, built from config by
:mod:`forgetting.study.policies`; every consumer (proxy, planner, analysis) sees one type.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

SCOPES: tuple[str, ...] = ("reasoning", "tool_output", "both")
GRANULARITIES: tuple[str, ...] = ("turn", "token")
TURN_AMOUNTS: tuple[int, ...] = (25, 50, 75, 100)
TOKEN_AMOUNTS: tuple[int, ...] = (25, 50, 75)  # token-level 100 % equals turn-level 100 %: not run
AMOUNTS: dict[str, tuple[int, ...]] = {"turn": TURN_AMOUNTS, "token": TOKEN_AMOUNTS}
#: retention delay ``keep_last`` of the paper's two timings
TIMINGS: dict[str, int] = {"delayed": 2, "immediate": 0}
BASELINE = "baseline"


def timing_of(keep_last: int) -> str | None:
    """The paper's timing with this retention delay, None for any other delay."""
    return next((t for t, k in TIMINGS.items() if k == keep_last), None)
#: the parts of a turn deletion rewrites (never the preamble or an action)
PARTS: tuple[str, ...] = ("reasoning", "tool_output")
#: the parts of a turn a scope deletes
SCOPE_PARTS: dict[str, tuple[str, ...]] = {
    "reasoning": ("reasoning",),
    "tool_output": ("tool_output",),
    "both": ("reasoning", "tool_output"),
}


@dataclass(frozen=True)
class Deletion:
    """One deletion configuration: what the proxy deletes from old turns, and when.

    ``policy`` is ``"none"`` for the baseline and ``"random"`` for the paper's random
    turn- or token-level deletion; other policies (see :mod:`forgetting.study.policies`) add
    their parameters in ``params``. ``amount`` is a percentage in (0, 100].
    """

    name: str
    policy: str = "random"
    scope: str | None = None
    granularity: str | None = None
    amount: float | None = None
    keep_last: int = 0
    timing: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_baseline(self) -> bool:
        return self.policy == "none"

    @property
    def is_paper(self) -> bool:
        """One of the paper's 42 configurations."""
        return self.name in PAPER_NAMES

    @property
    def parts(self) -> tuple[str, ...]:
        """The turn parts this configuration may delete (``reasoning``, ``tool_output``)."""
        return SCOPE_PARTS[self.scope] if self.scope else ()

    def columns(self) -> dict[str, Any]:
        """The configuration's columns in the datasets and statistics, in their order
        (:data:`forgetting.records.schemas.CONFIGURATION_COLUMNS`)."""
        return {"policy": self.policy, "scope": self.scope, "granularity": self.granularity, "amount": self.amount,
                "timing": self.timing, "keep_last": self.keep_last}

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "policy": self.policy,
            "scope": self.scope,
            "granularity": self.granularity,
            "amount": self.amount,
            "keep_last": self.keep_last,
            "timing": self.timing,
            "params": dict(sorted(self.params.items())),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Deletion:
        return cls(
            name=data["name"],
            policy=data.get("policy", "random"),
            scope=data.get("scope"),
            granularity=data.get("granularity"),
            amount=data.get("amount"),
            keep_last=int(data.get("keep_last", 0)),
            timing=data.get("timing"),
            params=dict(data.get("params") or {}),
        )


BASELINE_DELETION = Deletion(name=BASELINE, policy="none")


def config_name(timing: str, granularity: str, scope: str, amount: int | float) -> str:
    amount_s = str(int(amount)) if float(amount).is_integer() else str(amount)
    return f"{timing}-{granularity}-{scope}-{amount_s}"


def paper_configurations() -> list[Deletion]:
    """The paper's 42 configurations, in a fixed order (timing, scope, granularity, amount)."""
    out = []
    for timing, scope, granularity in itertools.product(TIMINGS, SCOPES, GRANULARITIES):
        for amount in AMOUNTS[granularity]:
            out.append(
                Deletion(
                    name=config_name(timing, granularity, scope, amount),
                    policy="random",
                    scope=scope,
                    granularity=granularity,
                    amount=float(amount),
                    keep_last=TIMINGS[timing],
                    timing=timing,
                )
            )
    return out


PAPER_CONFIGURATIONS: tuple[Deletion, ...] = tuple(paper_configurations())
PAPER_NAMES: frozenset[str] = frozenset(d.name for d in PAPER_CONFIGURATIONS)
_BY_NAME: dict[str, Deletion] = {d.name: d for d in PAPER_CONFIGURATIONS}


def paper_configuration(name: str) -> Deletion:
    """Look up ``baseline`` or one of the 42 by name; KeyError if it is not one of them."""
    if name == BASELINE:
        return BASELINE_DELETION
    return _BY_NAME[name]


def filter_configurations(
    configurations: Iterable[Deletion],
    *,
    scope: Iterable[str] | None = None,
    granularity: Iterable[str] | None = None,
    amount: Iterable[float] | None = None,
    timing: Iterable[str] | None = None,
) -> list[Deletion]:
    """Keep the configurations whose every given dimension is among the given values."""
    want = {
        "scope": set(scope) if scope is not None else None,
        "granularity": set(granularity) if granularity is not None else None,
        "amount": {float(a) for a in amount} if amount is not None else None,
        "timing": set(timing) if timing is not None else None,
    }
    out = []
    for d in configurations:
        values = {"scope": d.scope, "granularity": d.granularity, "amount": d.amount, "timing": d.timing}
        if all(allowed is None or values[key] in allowed for key, allowed in want.items()):
            out.append(d)
    return out
