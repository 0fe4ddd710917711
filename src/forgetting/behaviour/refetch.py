"""Re-fetch detection (SPEC §4).

* A read's **distinct lines**: the non-blank lines of its output, whitespace-trimmed, with a
  line-number prefix of the ``cat -n`` / ``nl -ba`` / Trae ``view`` kind (spaces, digits, a
  tab) removed, as a set.
* A read is a **re-fetch** when at least ``threshold`` of its distinct lines appeared in
  earlier reads of the run (earlier tool calls: earlier turns, or earlier in the same turn).
  Its **overlap** is that share. A read with no distinct line has no overlap and is never
  a re-fetch (it still counts as a read).
* Its **source** is the most recent earlier read holding *more than half* of its distinct
  lines; when no single earlier read does (its lines are spread over several), the earlier
  read holding the largest share, the most recent one on a tie. **Distance** = the
  re-fetch's turn − the source's turn. **was_deleted**: the source's output had been
  rewritten in the prompt of the model call that issued the re-fetch.
* **Deleted vs kept**, per read output (a read with at least one distinct line): if it is
  the source of a later re-fetch, its state is taken at its first such re-fetch (deleted
  by then or not); otherwise at the end of the run (rewritten at any call or not). So
  ``n_outputs_deleted_refetched / n_outputs_deleted`` and ``n_outputs_kept_refetched /
  n_outputs_kept`` are how often deleted and kept outputs are re-fetched.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from forgetting.behaviour.load import Deletions

_LINE_NUMBER = re.compile(r"^[ \t]*\d+\t")


def distinct_lines(text: str) -> frozenset[str]:
    out = set()
    for line in text.splitlines():
        line = _LINE_NUMBER.sub("", line, count=1).strip()
        if line:
            out.add(line)
    return frozenset(out)


@dataclass(frozen=True)
class ReadRow:
    """Re-fetch facts of one read."""

    n_distinct_lines: int
    overlap: float | None
    is_refetch: bool
    source: int | None = None  # position (in the run's tool calls) of its source read
    distance: int | None = None
    was_deleted: bool | None = None


@dataclass(frozen=True)
class RefetchSummary:
    n_reads: int
    n_refetches: int
    refetch_rate: float | None
    n_refetches_deleted: int
    n_refetches_kept: int
    median_refetch_distance: float | None
    n_outputs_deleted: int
    n_outputs_deleted_refetched: int
    n_outputs_kept: int
    n_outputs_kept_refetched: int


@dataclass(frozen=True)
class _Read:
    position: int
    turn: int
    lines: frozenset[str]


def _source(lines: frozenset[str], earlier: Sequence[_Read]) -> _Read:
    best, best_n = earlier[-1], -1
    for r in reversed(earlier):  # most recent first
        n = len(lines & r.lines)
        if 2 * n > len(lines):
            return r
        if n > best_n:
            best, best_n = r, n
    return best


def detect_refetches(
    turns: Sequence[int],
    payloads: Sequence[str],
    is_read: Sequence[bool],
    deletions: Deletions,
    threshold: float = 0.8,
) -> tuple[list[ReadRow | None], RefetchSummary]:
    """Per tool call (in order): its :class:`ReadRow` (None for non-reads), and the run summary."""
    frac = Fraction(threshold).limit_denominator(10**6)
    rows: list[ReadRow | None] = []
    reads: list[_Read] = []
    seen: set[str] = set()
    first_refetch_of: dict[int, int] = {}  # source position → turn of its first re-fetch
    for pos, (turn, payload, read) in enumerate(zip(turns, payloads, is_read, strict=True)):
        if not read:
            rows.append(None)
            continue
        lines = distinct_lines(payload)
        if not lines:
            rows.append(ReadRow(0, None, False))
            reads.append(_Read(pos, turn, lines))
            continue
        common = len(lines & seen)
        overlap = common / len(lines)
        if reads and common * frac.denominator >= frac.numerator * len(lines):
            src = _source(lines, reads)
            first_refetch_of.setdefault(src.position, turn)
            rows.append(
                ReadRow(
                    len(lines),
                    overlap,
                    True,
                    src.position,
                    turn - src.turn,
                    deletions.deleted_by(src.turn, turn),
                )
            )
        else:
            rows.append(ReadRow(len(lines), overlap, False))
        reads.append(_Read(pos, turn, lines))
        seen |= lines

    refetches = [r for r in rows if r is not None and r.is_refetch]
    n_reads = sum(1 for r in rows if r is not None)
    counts = {"deleted": 0, "deleted_refetched": 0, "kept": 0, "kept_refetched": 0}
    for r in reads:
        if not r.lines:
            continue
        at = first_refetch_of.get(r.position)
        deleted = deletions.ever(r.turn) if at is None else deletions.deleted_by(r.turn, at)
        key = "deleted" if deleted else "kept"
        counts[key] += 1
        if at is not None:
            counts[f"{key}_refetched"] += 1
    distances = [r.distance for r in refetches if r.distance is not None]
    summary = RefetchSummary(
        n_reads=n_reads,
        n_refetches=len(refetches),
        refetch_rate=len(refetches) / n_reads if n_reads else None,
        n_refetches_deleted=sum(1 for r in refetches if r.was_deleted),
        n_refetches_kept=sum(1 for r in refetches if not r.was_deleted),
        median_refetch_distance=float(statistics.median(distances)) if distances else None,
        n_outputs_deleted=counts["deleted"],
        n_outputs_deleted_refetched=counts["deleted_refetched"],
        n_outputs_kept=counts["kept"],
        n_outputs_kept_refetched=counts["kept_refetched"],
    )
    return rows, summary
