"""The deletion engine: (history, configuration, run seed) → reduced history + what was deleted.

:func:`reduce_history` is a pure function: the same messages, configuration and seed give
the same result in any process, and the input is never modified. :class:`Reducer` is the
same function with memory for one run — the proxy keeps one per run so a growing history
is tokenized and rewritten once per (turn, part, message), not at every call: when a history
extends the previous call's, that reduction is reused for every turn that was already
complete and only what is new is worked on. Caches are keyed by the original text and
checked on every use, so a memoized result is always the one the pure function gives (a
property test holds the two equal on arbitrary sequences of histories).

Which parts are *new* at a call: the policy's decisions for this history minus its
decisions for the previous call's history (everything before the last assistant
message — for a well-behaved agent, exactly the previous request). Being computed from the
messages alone, this holds for a retried or replayed call too.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from forgetting.deletion.draws import rng
from forgetting.deletion.parts import apply_fields, decompose, text_slots
from forgetting.deletion.policy import HistoryView, Policy, PolicyError, Rewrite
from forgetting.deletion.registry import make_policy
from forgetting.deletion.settings import DeletionSettings
from forgetting.deletion.tokens import kept_text, removal_mask
from forgetting.grid import PARTS, Deletion
from forgetting.prompt import tokenizer
from forgetting.prompt.messages import ActionSyntax, Segmented, segment
from forgetting.records import PartDeletion

_PART_ORDER = {p: k for k, p in enumerate(PARTS)}


def _in_order(rw: Rewrite) -> tuple[int, int]:
    """A rewrite's place: by turn, then by part as :data:`forgetting.grid.PARTS` lists them."""
    return rw.turn, _PART_ORDER[rw.part]


@dataclass(frozen=True)
class Reduction:
    messages: list[dict[str, Any]]  # the history to send (new dicts; the input is untouched)
    records: tuple[PartDeletion, ...]  # every part rewritten in this history
    new: tuple[PartDeletion, ...]  # the parts rewritten for the first time at this call
    n_turns: int
    style: str

    @property
    def changed(self) -> bool:
        return bool(self.records)

    @property
    def deleted(self) -> tuple[PartDeletion, ...]:
        """The call log's ``deleted`` records: the parts newly rewritten at this call."""
        return self.new


@dataclass(frozen=True)
class _Done:
    original: tuple[str, ...]  # the slot texts the result was computed from
    fields: tuple[tuple[Any, ...], ...]  # the rewritten slots
    before: int
    after: int
    removed: int


@dataclass
class _Call:
    """What the reducer remembers of the last call of its run."""

    messages: list[dict[str, Any]]  # the history as received
    out: list[dict[str, Any]]  # as reduced
    applied: dict[Rewrite, list[PartDeletion]]  # each rewrite and the messages it rewrote
    segmented: Segmented  # its turns
    records: list[PartDeletion]  # every part rewritten in it, in order

    @property
    def n_turns(self) -> int:
        return len(self.segmented.turns)


class Reducer:
    """Reduces the histories of one run; memoizes tokenization and rewrites. Thread-safe."""

    def __init__(
        self,
        deletion: Deletion,
        seed: int,
        *,
        actions: ActionSyntax | None,
        settings: DeletionSettings,
        policy: Policy | None = None,
    ) -> None:
        """``actions``: how the run's agent writes actions into its reply text — the agent's
        own pattern (:func:`forgetting.agents.action_syntax`); None for an agent whose
        actions are tool calls. Text it matches is never deleted; any other text is reasoning.
        ``settings``: the study's ``deletion`` section (``study.deletion``)."""
        self.deletion = deletion
        self.seed = int(seed)
        self.actions = actions
        self.settings = settings
        self.policy = policy or make_policy(deletion, self.settings)
        self._done: dict[tuple[int, str, Rewrite], _Done] = {}
        self._counts: dict[str, int] = {}
        self._last: _Call | None = None
        self._lock = threading.Lock()

    # -- token counting, memoized per text ------------------------------------------------
    def count(self, text: str) -> int:
        n = self._counts.get(text)
        if n is None:
            n = self._counts[text] = tokenizer.count(text)
        return n

    # -- one message ---------------------------------------------------------------------
    def _rewrite_cores(
        self, rw: Rewrite, ordinal: int, cores: tuple[str, ...]
    ) -> tuple[tuple[str, ...], int, int]:
        """New cores for a message's part; also its tokens before and the tokens removed."""
        if rw.mode == "turn":
            before = sum(self.count(c) for c in cores)
            text = rw.placeholder or self.settings.placeholders[rw.part]
            if "{" in text:
                lines = sum(c.count("\n") + 1 for c in cores)
                text = text.replace("{lines}", str(lines)).replace("{tokens}", str(before))
            new = (text,) + ("",) * (len(cores) - 1)
            removed = before
        else:
            ids = [tokenizer.encode(c) for c in cores]
            before = sum(len(x) for x in ids)
            gen = rng(self.seed, "token", rw.turn, rw.part, ordinal)
            mask = removal_mask(before, float(rw.amount or 0.0), gen, self.settings.token_draw)
            out, pos = [], 0
            for core, core_ids in zip(cores, ids, strict=True):
                m = mask[pos : pos + len(core_ids)]
                pos += len(core_ids)
                out.append(kept_text(core_ids, m, ascii_only=core.isascii()))
            new = tuple(out)
            removed = int(mask.sum())
        return new, before, removed

    def _part(
        self, messages: Sequence[Mapping[str, Any]], view: HistoryView, rw: Rewrite
    ) -> list[tuple[int, dict[str, Any], PartDeletion]]:
        out = []
        first = 0 if rw.part == "reasoning" else 1  # the assistant message is 0, observations 1, 2, …
        for ordinal, i in enumerate(view.message_indices(rw.turn, rw.part), start=first):
            msg = messages[i]
            original = tuple(t for _, t in text_slots(msg, rw.part == "reasoning"))
            key = (i, rw.part, rw)
            done = self._done.get(key)
            if done is None or done.original != original:
                ed = decompose(msg, rw.part, self.actions)
                if ed is None:
                    continue
                new, before, removed = self._rewrite_cores(rw, ordinal, ed.cores)
                after = sum(self.count(c) for c in new if c)
                done = self._done[key] = _Done(original, ed.fields(new), before, after, removed)
            rec = PartDeletion(rw.turn, rw.part, i, rw.mode, done.before, done.after, done.removed)
            out.append((i, apply_fields(msg, done.fields), rec))
        return out

    # -- one history ---------------------------------------------------------------------
    def _decide(self, view: HistoryView) -> list[Rewrite]:
        rewrites = self.policy.decide(view)
        if not rewrites:
            return rewrites
        turns = [rw.turn for rw in rewrites]
        parts = {(rw.turn, rw.part) for rw in rewrites}
        if min(turns) >= 1 and max(turns) <= view.n_turns and len(parts) == len(rewrites):
            return rewrites  # the usual case, checked at C speed; otherwise the first fault, named
        seen: set[tuple[int, str]] = set()
        for rw in rewrites:
            if not 1 <= rw.turn <= view.n_turns:
                raise PolicyError(f"policy {self.policy.name!r} rewrote turn {rw.turn} of {view.n_turns}")
            if (rw.turn, rw.part) in seen:
                raise PolicyError(f"policy {self.policy.name!r} rewrote turn {rw.turn} {rw.part} twice")
            seen.add((rw.turn, rw.part))
        raise AssertionError("unreachable")  # pragma: no cover

    def reduce(self, messages: Sequence[Mapping[str, Any]]) -> Reduction:
        with self._lock:
            return self._reduce(messages)

    def _reduce(self, messages: Sequence[Mapping[str, Any]]) -> Reduction:
        if self.deletion.is_baseline:
            seg = segment(messages)
            return Reduction([dict(m) for m in messages], (), (), len(seg.turns), seg.style)
        # the previous call of this run, when this history extends it (the usual case): its
        # segmentation, reduced messages and applied rewrites are reused, only new rewrites cost work
        last = self._last
        n_last = len(last.messages) if last is not None else 0
        extends = last is not None and len(messages) >= n_last and list(messages[:n_last]) == last.messages
        seg = segment(messages, head=(last.segmented, n_last) if extends and last is not None else None)
        view = HistoryView(messages, self.seed, actions=self.actions, segmented=seg, counter=self.count)
        rewrites = self._decide(view)
        head_call = extends and bool(seg.turns) and seg.turns[-1].assistant == n_last
        if head_call:
            previous = set(last.applied)  # the previous call's history is exactly this one's head
        else:
            previous_view = view.before_last_turn()
            previous = set(self._decide(previous_view)) if previous_view is not None else set()
        current = set(rewrites)
        unstable = (previous | (set(last.applied) if extends else set())) - current
        if unstable:
            raise PolicyError(
                f"policy {self.policy.name!r} is not stable: {sorted(unstable)[0]} was decided for an "
                "earlier call of this history but not for this one"
            )
        # a turn's messages are final once another turn follows it; the previous call's last
        # turn may since have gained tool outputs, so its rewrites are redone
        reused = {rw: recs for rw, recs in last.applied.items() if rw.turn < last.n_turns} if extends else {}
        base = last.out if extends else []
        out = list(base) + [dict(m) for m in messages[len(base) :]]  # entries are replaced, never mutated
        applied: dict[Rewrite, list[PartDeletion]] = {}
        records: list[PartDeletion] = []
        new: list[PartDeletion] = []
        todo = sorted((rw for rw in rewrites if rw not in reused), key=_in_order)
        if head_call and last is not None and (not todo or todo[0].turn >= last.n_turns):
            # every rewrite reused comes before every one to do: the previous call's records of
            # its finished turns (already in order) are this call's first, its rewrites all kept
            k = len(last.records)
            while k and last.records[k - 1].turn >= last.n_turns:
                k -= 1
            records, applied, ordered = last.records[:k], dict(reused), todo
        else:
            ordered = sorted(rewrites, key=_in_order)
        for rw in ordered:
            recs = reused.get(rw)  # none of those to do is reused
            if recs is None:
                recs = []
                for i, message, rec in self._part(messages, view, rw):
                    out[i] = message
                    recs.append(rec)
            applied[rw] = recs
            records += recs
            if rw not in previous:
                new += recs
        # shallow copies: a caller that reassigns a message's field in place is still seen (the
        # head that extends the previous call is equal to its copies, which are this reducer's own)
        head = last.messages if extends else []
        self._last = _Call(head + [dict(m) for m in messages[len(head) :]], out, applied, seg, records)
        return Reduction([dict(m) for m in out], tuple(records), tuple(new), view.n_turns, seg.style)


def reduce_history(
    messages: Sequence[Mapping[str, Any]],
    deletion: Deletion,
    seed: int,
    *,
    actions: ActionSyntax | None,
    placeholders: Mapping[str, str] | None = None,
    token_draw: str | None = None,
) -> Reduction:
    """Reduce one history under ``deletion`` with the run's ``seed`` (a pure function);
    ``actions`` as for :class:`Reducer`; ``placeholders`` and ``token_draw`` are the
    ``deletion`` section's keys (left out: the schema's defaults)."""
    given = {"placeholders": placeholders, "token_draw": token_draw}
    settings = DeletionSettings.from_section({k: v for k, v in given.items() if v is not None})
    return Reducer(deletion, seed, actions=actions, settings=settings).reduce(messages)
