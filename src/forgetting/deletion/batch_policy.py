"""Batched rewriting: the paper's random deletion, applied only every ``k`` calls.

The paper rewrites a turn as soon as it becomes eligible, so the prompt prefix breaks at
nearly every call. Here the turns that became eligible are held back and rewritten all at
once when ``k`` of them have gathered: with ``e = max(0, n − keep_last)`` eligible turns in a
history of ``n`` turns, the turns ``1 … k·⌊e/k⌋`` get the paper's decision (the same keyed
draws as ``random``), the rest stay intact. The cache breaks once per ``k`` calls; between
breaks the retention delay is in effect ``keep_last`` to ``keep_last + k − 1`` turns.

Config entry: ``policy: batch``, ``every`` (k ≥ 2) and the ``random`` keys (``scope``,
``granularity``, ``amount``, ``keep_last`` or ``timing``). Name:
``batch{k}-{retention}-{granularity}-{scope}-{amount}``, e.g. ``batch4-delayed-turn-tool_output-100``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import forgetting.deletion.random_policy as random_policy
from forgetting.deletion.policy import HistoryView, PolicyContext, Rewrite
from forgetting.grid import Deletion


def batch_frontier(n_turns: int, keep_last: int, every: int) -> int:
    """The last turn rewritten in a history of ``n_turns``: eligible turns rounded down to a
    multiple of ``every``."""
    eligible = max(0, n_turns - keep_last)
    return eligible - eligible % every


class BatchedDeletion(random_policy.RandomDeletion):
    name = "batch"
    name_scheme = "batch{k}-{retention}-{granularity}-{scope}-{amount}"

    def decide(self, view: HistoryView) -> list[Rewrite]:
        d = self.deletion
        out: list[Rewrite] = []
        for turn in range(1, batch_frontier(view.n_turns, d.keep_last, int(d.params["every"])) + 1):
            out += self._turn(view.seed, turn)
        return out

    @classmethod
    def configure(cls, entry: Mapping[str, Any], key: str, context: PolicyContext) -> Deletion:
        random_policy.check_keys(entry, (*random_policy.RANDOM_KEYS, "every"), key, cls.name)
        every = random_policy.integer(entry, "every", key, 2)
        d = Deletion(name="", policy=cls.name, **random_policy.random_fields(entry, key), params={"every": every})
        return cls.named(d, entry)

    @classmethod
    def canonical_name(cls, deletion: Deletion) -> str:
        return f"batch{deletion.params['every']}-{random_policy.random_words(deletion)}"

    @classmethod
    def name_entry(cls, name: str, key: str) -> dict[str, Any] | None:
        found = cls.numbered_entry(name, key)
        return None if found is None else {"policy": cls.name, "every": found[0], **found[1]}

    @classmethod
    def label(cls, entry: Mapping[str, Any]) -> str:
        return f"batched ×{entry.get('every')} · {random_policy.retention_label(int(entry.get('keep_last', 0)))}"
