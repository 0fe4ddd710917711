"""The synthetic agent: what it does next, given what the model can still see.

It is a probabilistic policy, not a language model. At every call it is shown the history
*after deletion* (the real :class:`forgetting.deletion.Reducer` made it) and measures, for
each earlier message, how much of it was lost (:class:`Sight`: 0 = intact, 1 = replaced by a
placeholder, the removed share of the characters for token-level deletion). Its plan is a
queue of intents fixed at the start of the run (search, read the files the fix needs,
reproduce, edit, test, submit, with detours); deletion bends it in four ways, each an
explicit parameter of :class:`AgentProfile`:

* **re-read before use** — an intent that needs a region (the edit needs the bug's lines)
  checks the best copy still visible; a lost one is read again with probability
  ``reread · loss^0.6`` (a re-fetch). Re-reads that are lost again count against
  ``max_rereads``; then the agent is *stuck*: it loops on the same command until the turn cap
  (``loop_when_stuck``) or edits blind (``blind_success``);
* **re-ground** — per call, ``reground · mean_loss^0.6`` of re-reading something it read
  before when its read outputs are being lost;
* **re-orient** — per call, ``reorient · loss^0.6`` of re-orienting (a re-read or ``git
  diff``) when its own latest reasoning was lost (immediate reasoning deletion);
* **forget** — per call, ``forget · √(tool loss · reasoning loss)``: with both its notes and
  its observations gone it redoes earlier work (deleting both scopes at 100 % sends runs to
  the cap).

The concave ``loss^0.6`` makes a token-level deletion of X % (every output X % damaged) cost
more re-reads than a turn-level one (X % of outputs gone whole), as the paper observed.
Whether the run resolves the task is drawn at submission from the task's difficulty and
what the agent had to do without (blind or damaged edits, a lost diagnosis).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from forgetting_testkit.synth.world import TaskWorld

TEST_FILE = -1  # Step.file of the task's test file


@dataclass(frozen=True)
class AgentProfile:
    name: str
    reread: float  # chance scale of re-reading a needed region whose copy was lost
    reground: float  # per-call chance scale of re-reading when read outputs are lost
    reorient: float  # per-call chance scale of re-orienting when the latest reasoning is lost
    forget: float  # per-call chance scale of redoing work when both scopes are lost
    max_rereads: int  # re-reads of one region before the agent is stuck
    loop_when_stuck: float  # stuck: chance to loop on one command until the cap
    blind_success: float  # a blind edit is right with this chance (times the task's)
    solve_factor: float  # the agent's skill relative to the task's difficulty
    turn_factor: float  # run length relative to the task's
    wrong_first: float  # chance the first edit is wrong (the tests then fail)
    verify_read: float  # chance to re-read the edited lines after an edit (a re-fetch even without deletion)
    spontaneous_reread: float  # per call: chance to re-read something still visible
    rabbit_hole: float  # per run: chance to explore until the cap


PROFILES: Mapping[str, AgentProfile] = {
    "trae": AgentProfile(
        "trae", reread=0.85, reground=0.3, reorient=0.22, forget=0.8, max_rereads=4, loop_when_stuck=0.7,
        blind_success=0.02, solve_factor=1.0, turn_factor=1.1, wrong_first=0.25, verify_read=0.45,
        spontaneous_reread=0.03, rabbit_hole=0.008,
    ),
    "mini": AgentProfile(
        "mini", reread=0.75, reground=0.25, reorient=0.45, forget=0.55, max_rereads=3, loop_when_stuck=0.35,
        blind_success=0.22, solve_factor=0.93, turn_factor=1.0, wrong_first=0.3, verify_read=0.35,
        spontaneous_reread=0.03, rabbit_hole=0.006,
    ),
}
PROFILES = {**PROFILES, "mini-text": PROFILES["mini"]}


def profile_of(agent: str) -> AgentProfile:
    return PROFILES[agent]


@dataclass(frozen=True)
class Step:
    """One tool call the agent decides on, before it is rendered for its agent."""

    kind: str  # search | read | edit | create | run | test | other | think | submit
    file: int | None = None  # world.files index, TEST_FILE, or None
    lo: int = 0
    hi: int = 0
    why: str = ""  # what the reasoning says it is for
    variant: int = 0  # which command form (rendering)
    refetch_of: int | None = None  # the region a deliberate re-read restores
    loop: bool = False


@dataclass
class ReadRecord:
    turn: int
    obs_index: int  # message index of its observation in the history
    file: int
    lo: int
    hi: int


class Sight:
    """How much of each earlier message the model can still see at this call."""

    def __init__(self, original: Sequence[Mapping[str, Any]], reduced: Sequence[Mapping[str, Any]]) -> None:
        self.original = original
        self.reduced = reduced
        self._memo: dict[int, float] = {}

    def loss(self, index: int) -> float:
        got = self._memo.get(index)
        if got is not None:
            return got
        a = self.original[index].get("content")
        b = self.reduced[index].get("content")
        if a is b or a == b or not isinstance(a, str) or not a.strip():
            value = 0.0
        else:
            core_a, core_b = len(a.strip()), len(b.strip()) if isinstance(b, str) else 0
            value = 1.0 if core_b < 60 else min(1.0, max(0.0, 1.0 - core_b / core_a))
        self._memo[index] = value
        return value


@dataclass
class Outcome:
    status: str = "submitted"  # submitted | capped | context_exceeded
    solve_weight: float = 1.0
    blind_edits: int = 0
    edits: dict[tuple[int, int], str] = field(default_factory=dict)  # (file, line) → new line
    tested_ok: bool = False


def _chance(x: float) -> float:
    return min(1.0, max(0.0, x))


def _shape(loss: float) -> float:
    return loss**0.6 if loss > 0 else 0.0


class SyntheticAgent:
    """Decides each call's tool call; see the module docstring."""

    def __init__(
        self, world: TaskWorld, profile: AgentProfile, rng: np.random.Generator, *, scopes: Sequence[str]
    ) -> None:
        self.world = world
        self.p = profile
        self.rng = rng
        self.scopes = tuple(scopes)
        self.reads: list[ReadRecord] = []
        self.assistant_indices: list[int] = []
        self.attempts: dict[tuple[int, int, int], int] = {}
        self.reorients = 0
        self.diagnosis_index: int | None = None
        self.forced: deque[Step] = deque()
        self.loop_step: Step | None = None
        self.rabbit = bool(rng.random() < profile.rabbit_hole)
        self.outcome = Outcome()
        self.tests_failed = 0
        self.needs_fix = False
        self.plan: deque[tuple[str, ...]] = deque(self._plan())

    # -- the plan ---------------------------------------------------------------------
    def _window(self, file: int, around: int | None = None, width: int | None = None) -> tuple[int, int]:
        n = len(self._lines(file))
        width = width or int(self.rng.integers(40, 160))
        if n <= width or (n <= 260 and self.rng.random() < 0.5):
            return 1, n
        centre = around if around is not None else int(self.rng.integers(1, n + 1))
        lo = max(1, centre - int(self.rng.integers(width // 4, 3 * width // 4 + 1)))
        return lo, min(n, lo + width - 1)

    def _fresh_window(self, width: int | None) -> tuple[int, int, int]:
        """A window of a file the fix does not need, overlapping earlier reads as little as
        possible (a few tries): looking around, not re-reading."""
        w, rng = self.world, self.rng
        others = [i for i in range(len(w.files)) if i != w.target and i not in w.related] or [w.target]
        best: tuple[float, tuple[int, int, int]] | None = None
        for _ in range(6):
            f = others[int(rng.integers(len(others)))]
            lo, hi = self._window(f, width=width)
            seen = sum(max(0, min(hi, r.hi) - max(lo, r.lo) + 1) for r in self.reads if r.file == f)
            share = seen / (hi - lo + 1)
            if best is None or share < best[0]:
                best = (share, (f, lo, hi))
            if share < 0.2:
                break
        assert best is not None
        return best[1]

    def _lines(self, file: int | None) -> tuple[str, ...]:
        if file == TEST_FILE:
            return self.world.test_file.lines
        assert file is not None
        return self.world.files[file].lines

    def target_region(self) -> tuple[int, int, int]:
        lo, hi = self.world.bug_region()
        return self.world.target, lo, hi

    def _plan(self) -> list[tuple[str, ...]]:
        w, rng = self.world, self.rng
        target_lo, target_hi = self._window(w.target, around=w.bug_line, width=int(rng.integers(60, 140)))
        related = [(f, *self._window(f, width=int(rng.integers(30, 90)))) for f in w.related]
        self.related_regions = [(f, lo, min(hi, lo + 29)) for f, lo, hi in related]
        length = w.base_turns * self.p.turn_factor * math.exp(rng.normal(0.0, 0.25))
        core: list[tuple[str, ...]] = [("search",), ("search",)]
        reads = [("read", str(w.target), str(target_lo), str(target_hi))]
        reads += [("read", str(f), str(lo), str(hi)) for f, lo, hi in related]
        order = rng.permutation(len(reads))
        core += [reads[i] for i in order]
        core += [("diagnose",), ("create",), ("run",), ("edit",)]
        if rng.random() < self.p.verify_read:
            core.append(("verify",))
        core += [("test",), ("submit",)]
        fill = max(0, round(length) - len(core))
        extras = rng.choice(["context", "search", "detour", "test_read", "think"], size=fill,
                            p=[0.42, 0.22, 0.22, 0.06, 0.08])
        # most filler happens while exploring, before the diagnosis
        diag = core.index(("diagnose",))
        plan = list(core)
        for kind in extras:
            pos = int(rng.integers(2, diag + 1)) if rng.random() < 0.8 else int(rng.integers(diag + 1, len(plan)))
            plan.insert(pos, (str(kind),))
            diag = plan.index(("diagnose",))
        return plan

    # -- what the model can still see -------------------------------------------------------
    def region_loss(self, sight: Sight, file: int, lo: int, hi: int) -> float:
        """The loss of the best copy of lines lo..hi of ``file`` in the history (1 if never read)."""
        best = 1.0
        need = hi - lo + 1
        for r in self.reads:
            if r.file != file:
                continue
            overlap = min(hi, r.hi) - max(lo, r.lo) + 1
            if overlap >= 0.8 * need:
                best = min(best, sight.loss(r.obs_index))
                if best == 0.0:
                    break
        return best

    def _mean_read_loss(self, sight: Sight) -> float:
        if not self.reads:
            return 0.0
        return sum(sight.loss(r.obs_index) for r in self.reads) / len(self.reads)

    def _reasoning_loss(self, sight: Sight, *, latest: bool) -> float:
        if "reasoning" not in self.scopes or not self.assistant_indices:
            return 0.0
        if latest:
            return sight.loss(self.assistant_indices[-1])
        older = self.assistant_indices[:-2]
        return sum(sight.loss(i) for i in older) / len(older) if older else 0.0

    # -- decisions -------------------------------------------------------------------------
    def _reread(self, file: int, lo: int, hi: int, why: str) -> Step:
        jitter_lo, jitter_hi = int(self.rng.integers(0, 8)), int(self.rng.integers(0, 8))
        n = len(self._lines(file))
        return Step("read", file, max(1, lo - jitter_lo), min(n, hi + jitter_hi), why,
                    variant=int(self.rng.integers(0, 4)), refetch_of=file)

    def _random_earlier_read(self, relevant_first: bool) -> Step | None:
        if not self.reads:
            return None
        pool = self.reads
        if relevant_first:
            rel = [r for r in self.reads if r.file == self.world.target or r.file in self.world.related]
            pool = rel or self.reads
        r = pool[int(self.rng.integers(len(pool)))]
        width = min(r.hi - r.lo + 1, int(self.rng.integers(25, 70)))
        lo = r.lo + int(self.rng.integers(0, max(1, r.hi - r.lo + 2 - width)))
        return self._reread(r.file, lo, lo + width - 1, "recheck")

    def _lost_read(self, sight: Sight) -> Step | None:
        """A re-read of an earlier read whose output was lost (drawn by how much was lost)."""
        losses = np.array([sight.loss(r.obs_index) for r in self.reads])
        if not losses.sum():
            return None
        r = self.reads[int(self.rng.choice(len(self.reads), p=losses / losses.sum()))]
        width = min(r.hi - r.lo + 1, int(self.rng.integers(25, 70)))
        lo = r.lo + int(self.rng.integers(0, max(1, r.hi - r.lo + 2 - width)))
        return self._reread(r.file, lo, lo + width - 1, "recheck")

    def _disturbance(self, sight: Sight) -> Step | None:
        """A step deletion (or habit) inserts before the plan's next one, if any."""
        rng = self.rng
        tool_loss = self._mean_read_loss(sight) if "tool_output" in self.scopes else 0.0
        if "reasoning" in self.scopes and "tool_output" in self.scopes:
            old = self._reasoning_loss(sight, latest=False)
            if rng.random() < _chance(self.p.forget * math.sqrt(tool_loss * old)):
                if rng.random() < 0.5:
                    return Step("search", why="forgot", variant=int(rng.integers(0, 3)))
                return self._random_earlier_read(relevant_first=False)
        if tool_loss and rng.random() < _chance(self.p.reground * _shape(tool_loss)):
            return self._lost_read(sight)
        latest = self._reasoning_loss(sight, latest=True)
        if latest and self.reorients < 12 and rng.random() < _chance(self.p.reorient * _shape(latest)):
            self.reorients += 1
            if rng.random() < 0.6:
                return self._random_earlier_read(relevant_first=True)
            return Step("other", why="reorient", variant=1)
        if rng.random() < self.p.spontaneous_reread:
            return self._random_earlier_read(relevant_first=True)
        return None

    def _needs(self, sight: Sight, regions: Sequence[tuple[int, int, int]]) -> Step | None:
        """A re-read of the first needed region whose copy is lost (or None: go ahead)."""
        for file, lo, hi in regions:
            loss = self.region_loss(sight, file, lo, hi)
            if loss <= 0.0:
                continue
            key = (file, lo, hi)
            if self.rng.random() < _chance(self.p.reread * _shape(loss)):
                self.attempts[key] = self.attempts.get(key, 0) + 1
                if self.attempts[key] > self.p.max_rereads:
                    stuck_loop = self.rng.random() < self.p.loop_when_stuck * loss
                    if stuck_loop:
                        self.loop_step = self._reread(file, lo, hi, "stuck")
                        self.loop_step = Step(**{**self.loop_step.__dict__, "loop": True})
                        return self.loop_step
                    self.outcome.blind_edits += 1
                    self.outcome.solve_weight *= self.p.blind_success
                    continue
                return self._reread(file, lo, hi, "restore")
            self.outcome.solve_weight *= 1.0 - 0.25 * loss  # worked from a damaged copy
        return None

    def next_step(self, sight: Sight, calls_left: int) -> Step:
        if self.loop_step is not None:
            return self.loop_step
        if self.forced:
            return self.forced.popleft()
        if self.rabbit and len(self.plan) <= 3:
            self.plan.appendleft(("context_small",) if self.rng.random() < 0.5 else ("search",))
        step = self._disturbance(sight)
        if step is not None:
            return step
        intent = self.plan[0]
        kind = intent[0]
        if kind in ("edit", "create") or (kind == "test" and self.needs_fix):
            regions = [self.target_region()]
            if kind == "edit":
                regions += [r for r in self.related_regions if self.rng.random() < 0.5]
            step = self._needs(sight, regions)
            if step is not None:
                return step
            if kind == "edit" and self.diagnosis_index is not None and "reasoning" in self.scopes:
                loss = sight.loss(self.diagnosis_index)
                if loss and self.reorients < 12 and self.rng.random() < _chance(0.5 * self.p.reorient * _shape(loss)):
                    self.reorients += 1
                    return self._reread(*self.target_region(), "restate")
        self.plan.popleft()
        return self._step_for(intent)

    def _step_for(self, intent: tuple[str, ...]) -> Step:
        rng, w = self.rng, self.world
        kind = intent[0]
        if kind == "read":
            f, lo, hi = int(intent[1]), int(intent[2]), int(intent[3])
            return Step("read", f, lo, hi, "relevant", variant=int(rng.integers(0, 4)))
        if kind in ("context", "context_small"):
            f, lo, hi = self._fresh_window(int(rng.integers(20, 40)) if kind == "context_small" else None)
            return Step("read", f, lo, hi, "context", variant=int(rng.integers(0, 4)))
        if kind == "test_read":
            lo, hi = self._window(TEST_FILE, width=int(rng.integers(40, 120)))
            return Step("read", TEST_FILE, lo, hi, "tests", variant=int(rng.integers(0, 4)))
        if kind == "search":
            return Step("search", why="explore", variant=int(rng.integers(0, 3)))
        if kind == "detour":
            return Step("other", why="detour", variant=int(rng.integers(0, 4)))
        if kind == "think":
            return Step("think", why="plan")
        if kind == "diagnose":
            return Step("other", why="diagnose", variant=0)
        if kind == "create":
            return Step("create", why="reproduce")
        if kind == "run":
            return Step("run", why="reproduce")
        if kind == "edit":
            wrong = not self.outcome.edits and rng.random() < self.p.wrong_first
            self.needs_fix = wrong
            self.outcome.edits[(w.target, w.bug_line)] = "wrong" if wrong else "right"
            return Step("edit", w.target, w.bug_line, w.bug_line, "wrong" if wrong else "fix")
        if kind == "verify":
            lo, hi = self.world.bug_region()
            return Step("read", w.target, lo, hi, "verify", variant=int(rng.integers(0, 4)))
        if kind == "test":
            failed = self.needs_fix
            if failed:
                self.tests_failed += 1
                self.needs_fix = False
                self.plan.appendleft(("test",))
                self.plan.appendleft(("edit",))
            else:
                self.outcome.tested_ok = True
            return Step("test", TEST_FILE, why="fail" if failed else "pass")
        if kind == "submit":
            return Step("submit")
        raise ValueError(f"unknown intent {kind!r}")

    # -- bookkeeping after a step was executed ------------------------------------------------
    def executed(self, step: Step, turn: int, assistant_index: int, obs_index: int | None) -> None:
        self.assistant_indices.append(assistant_index)
        if step.kind == "read" and obs_index is not None and step.file is not None:
            self.reads.append(ReadRecord(turn, obs_index, step.file, step.lo, step.hi))
        if step.why in ("diagnose", "restate"):
            self.diagnosis_index = assistant_index

    def resolved(self) -> bool:
        """Drawn at submission: the task's difficulty, the agent's skill, what it did without."""
        o = self.outcome
        p = self.world.solve_p * self.p.solve_factor * o.solve_weight
        if not o.edits:
            p = 0.0
        return bool(self.rng.random() < p)
