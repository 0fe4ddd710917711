"""Seeded draws of the scripted model.

Every draw is a pure function of (server seed, run key, call index, purpose), hashed with
SHA-256: the same run replays identically, each purpose draws independently (adding a draw
never shifts another), and runs with different keys (baseline repeats) differ. The run key
is the ``X-Forgetting-Seed`` header the deletion proxy adds, or, without it, a hash of the
task message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from forgetting.foundation.seeds import text_hex, unit

T = TypeVar("T")


def run_key_for(seed_header: str | None, task_text: str) -> str:
    if seed_header and seed_header.strip():
        return "h:" + seed_header.strip()
    return "t:" + text_hex(task_text)[:16]


@dataclass(frozen=True)
class Draws:
    server_seed: int
    run_key: str
    call_index: int

    def call(self, purpose: str) -> float:
        """A uniform draw in [0, 1) for this call."""
        return unit(self.server_seed, self.run_key, self.call_index, purpose)

    def run(self, purpose: str) -> float:
        """A uniform draw in [0, 1) fixed for the whole run."""
        return unit(self.server_seed, self.run_key, "run", purpose)

    def call_choice(self, purpose: str, options: Sequence[T]) -> T:
        return options[int(self.call(purpose) * len(options))]

    def run_choice(self, purpose: str, options: Sequence[T]) -> T:
        return options[int(self.run(purpose) * len(options))]
