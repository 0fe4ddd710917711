"""Reuse-aware deletion: tool outputs of files the agent keeps coming back to stay; stale ones go.

Each turn's tool output *belongs to* the files its actions name (:mod:`forgetting.deletion.files`:
``cat a.py``, ``sed -i … a.py``, an editor's ``path``). A file is *used* by every later turn
whose actions name it again (a re-read, an edit, a test run of it). An output's last use is
the latest turn that used one of its files (or its own turn). The output becomes **stale**
once ``N`` turns pass without a use: in a history of ``n`` turns, turn ``t``'s output is stale
when ``n − last_use(t) ≥ N`` (and ``t`` is eligible, ``t ≤ n − keep_last``). A stale output is
replaced by the tool-output placeholder and stays replaced, even if its file is used again
later (the prefix cache and the stability contract need a rewrite to be permanent; the agent
sees the new read's output anyway). An output whose actions name no file (``ls``, ``grep -r``,
a test run of the whole suite) is stale ``N`` turns after it was produced.

Decisions are a fold over the turns (use and staleness at each history length), a pure
function of the actions; it is memoized per run and redone from the first turn whose actions
differ from the last call's.

Config entry: ``policy: reuse``, ``stale_after`` (N ≥ 1), ``keep_last`` (or ``timing``).
Name: ``reuse{N}-{retention}``, e.g. ``reuse4-delayed``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from forgetting.deletion.files import action_files, touches
from forgetting.deletion.names import parse_retention, retention_word, split_numbered
from forgetting.deletion.policy import HistoryView, Policy, PolicyContext, Rewrite, whole_tool_outputs
from forgetting.deletion.random_policy import check_keys, integer, keep_last_of, retention_label
from forgetting.deletion.settings import DeletionSettings
from forgetting.foundation.errors import ConfigError
from forgetting.grid import Deletion
from forgetting.prompt.messages import actions

_KEYS = ("name", "policy", "stale_after", "keep_last", "timing")


def advance(
    files: Sequence[frozenset[str]], last_use: list[int], stale: set[int], stale_after: int, keep_last: int
) -> None:
    """The fold, one turn on: from a history of ``m − 1`` turns to one of ``m = len(last_use) + 1``
    (``files[t − 1]``: the files turn ``t``'s actions name). Updates ``last_use`` and ``stale``."""
    m = len(last_use) + 1
    last_use.append(m)
    new = files[m - 1]
    if new:
        for t in range(1, m):
            if t not in stale and touches(files[t - 1], new):
                last_use[t - 1] = m
    for t in range(1, m - keep_last + 1):
        if t not in stale and m - last_use[t - 1] >= stale_after:
            stale.add(t)


def stale_turns(files: Sequence[frozenset[str]], stale_after: int, keep_last: int) -> set[int]:
    """The turns whose output is stale in a history whose turns name ``files`` (no memo)."""
    last_use: list[int] = []
    stale: set[int] = set()
    for _ in files:
        advance(files, last_use, stale, stale_after, keep_last)
    return stale


def turn_files(view: HistoryView, turn: int) -> frozenset[str]:
    """The files the actions of ``turn`` name."""
    out: frozenset[str] = frozenset()
    for action in actions(view.messages[view.turn(turn).assistant], view.actions):
        out |= action_files(action)
    return out


class ReuseAware(Policy):
    name = "reuse"
    name_scheme = "reuse{N}-{retention}"

    def __init__(self, deletion: Deletion, settings: DeletionSettings) -> None:
        super().__init__(deletion, settings)
        self._files: list[frozenset[str]] = []  # per turn, as of the last history folded
        self._states: list[tuple[tuple[int, ...], frozenset[int]]] = []  # after each turn

    def stale(self, view: HistoryView) -> set[int]:
        """The stale turns of this history (memoized fold)."""
        files = [turn_files(view, t) for t in range(1, view.n_turns + 1)]
        same = 0
        while same < min(len(files), len(self._files)) and files[same] == self._files[same]:
            same += 1
        self._files = files
        del self._states[same:]
        last_use, stale = (list(self._states[-1][0]), set(self._states[-1][1])) if self._states else ([], set())
        n_after, keep = int(self.deletion.params["stale_after"]), self.deletion.keep_last
        for _ in range(same, len(files)):
            advance(files, last_use, stale, n_after, keep)
            self._states.append((tuple(last_use), frozenset(stale)))
        return set(self._states[len(files) - 1][1]) if files else set()

    def decide(self, view: HistoryView) -> list[Rewrite]:
        return [Rewrite(t, "tool_output", "turn") for t in sorted(self.stale(view))]

    @classmethod
    def configure(cls, entry: Mapping[str, Any], key: str, context: PolicyContext) -> Deletion:
        check_keys(entry, _KEYS, key, cls.name)
        stale_after = integer(entry, "stale_after", key, 1)
        keep = keep_last_of(entry, key)
        return cls.named(whole_tool_outputs(cls.name, keep, None, stale_after=stale_after), entry)

    @classmethod
    def canonical_name(cls, deletion: Deletion) -> str:
        return f"reuse{deletion.params['stale_after']}-{retention_word(deletion.keep_last)}"

    @classmethod
    def name_entry(cls, name: str, key: str) -> dict[str, Any] | None:
        parsed = split_numbered(name, "reuse")
        if parsed is None:
            return None
        n, words = parsed
        keep = parse_retention(words[0], name, key) if len(words) == 1 else None
        if keep is None:
            raise ConfigError(f"{key}: {name!r} is not a reuse name; expected {cls.name_scheme}")
        return {"policy": cls.name, "stale_after": n, "keep_last": keep}

    @classmethod
    def label(cls, entry: Mapping[str, Any]) -> str:
        keep = retention_label(int(entry.get("keep_last", 0)))
        return f"reuse-aware, stale after {entry.get('stale_after')} · {keep}"
