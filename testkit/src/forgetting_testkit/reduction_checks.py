"""The contract every deletion policy keeps, as checks of one history's reductions: shared by
the engine's property tests (the paper's 42 configurations, tests/deletion/test_engine.py) and
the policies' (every policy, tests/deletion/test_policies.py)."""

from __future__ import annotations

from typing import Any

from forgetting.deletion import Reducer, reduce_history
from forgetting.deletion.names import parse_configuration_name
from forgetting.deletion.policy import PolicyContext
from forgetting.deletion.settings import DeletionSettings
from forgetting.grid import Deletion
from forgetting.prompt.messages import segment
from forgetting_testkit.histories import actions_of, messages_of_turn

#: the schema's deletion settings (a study that gives no ``deletion`` section)
DELETION_DEFAULTS = DeletionSettings.from_section()

#: what the policies read from a study in these tests: a turn cap of 12, the packaged prices
CONTEXT = PolicyContext.from_parts({"agent": {"turn_cap": 12}})
#: every policy beyond the paper, at several parameters
POLICY_NAMES = [
    "keep4-turn-tool_output-100",
    "keep3-token-both-50",
    "batch2-delayed-turn-both-50",
    "batch3-immediate-token-tool_output-75",
    "gate-delayed-turn-tool_output-100",
    "gate1-immediate-turn-both-100",
    "gate2-keep3-token-reasoning-50",
    "reuse1-immediate",
    "reuse2-delayed",
    "reuse3-keep3",
    "mask0",
    "mask3",
]


def policy_configurations() -> list[Deletion]:
    """The configurations of :data:`POLICY_NAMES`."""
    return [parse_configuration_name(n, "test", CONTEXT) for n in POLICY_NAMES]


def check_last_turns_intact(msgs: list[dict[str, Any]], d: Deletion, seed: int) -> None:
    """The last ``keep_last`` turns are never altered, and no record names one of them."""
    r = reduce_history(msgs, d, seed, actions=actions_of(msgs))
    n = len(segment(msgs).turns)
    for turn in range(max(1, n - d.keep_last + 1), n + 1):
        for i in messages_of_turn(msgs, turn):
            assert r.messages[i] == msgs[i]
    assert all(x.turn <= n - d.keep_last for x in r.records)


def check_memoized_equals_pure(msgs: list[dict[str, Any]], d: Deletion, seed: int, cuts: list[int]) -> None:
    """One run's memoized reducer gives what the pure function gives, on the history cut at
    each of ``cuts`` in turn (mid-turn too; growing and shrinking)."""
    reducer = Reducer(d, seed, actions=actions_of(msgs), settings=DELETION_DEFAULTS)
    for cut in cuts:
        assert reducer.reduce(msgs[:cut]) == reduce_history(msgs[:cut], d, seed, actions=actions_of(msgs))
