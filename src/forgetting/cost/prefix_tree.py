"""A compressed token trie (radix tree) of a run's prompts, with edges labelled by views
into the run's distinct blocks.

Why: cached tokens of call *i* are the longest common prefix (LCP) of its prompt with
*any* earlier prompt. Comparing each prompt with every earlier one costs
O(calls² × tokens); here each prompt is inserted once into a radix tree holding every
earlier prompt, and the depth where it leaves the tree is that LCP, exactly, at token
level (a prefix shared with an old branch counts as much as one shared with the latest).

How it stays cheap: an edge label is a list of *pieces* ``(block, lo, hi)`` — token
ranges of the interned blocks of :class:`~forgetting.cost.prompts.BlockStore` — and a
prompt is a list of whole-block pieces. Walking a prompt down an edge compares piece
lists, not tokens: a whole label equal to the prompt's next pieces is one C-level list
comparison; two pieces naming the same block at the same offset are equal without
looking at a token; tokens are compared (numpy, galloping from 32 tokens) only where two
different blocks meet, i.e. at the few points where the prompt diverges from history or a
block's variants share a head. Inserting a prompt costs O(edges on its path + tokens
compared at divergences); the tree has at most two nodes per prompt.

Each node also carries, per cache profile that needs it, the coverage of its edge by
cached prefixes (:mod:`forgetting.cost.cache_model`); splitting an edge splits it too.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from forgetting.cost.prompts import BlockStore

Piece = tuple[int, int, int]  # (block id, lo, hi): tokens arrays[block][lo:hi]
Coverage = list[tuple[int, float]]  # [(extent depth, last use)], extents ascending, times descending


def common_prefix(a: np.ndarray, i: int, b: np.ndarray, j: int, n: int) -> int:
    """Length of the common prefix of ``a[i:i+n]`` and ``b[j:j+n]`` (galloping compares)."""
    done, step = 0, 32
    while done < n:
        m = min(step, n - done)
        diff = np.flatnonzero(a[i + done : i + done + m] != b[j + done : j + done + m])
        if diff.size:
            return done + int(diff[0])
        done += m
        step *= 4
    return n


class Node:
    """The end of an edge; the edge covers token positions ``[start, end)`` of every
    prompt through it and is labelled ``pieces``."""

    __slots__ = ("children", "cov", "end", "pieces", "start")

    def __init__(self, pieces: list[Piece], start: int, end: int, slots: int) -> None:
        self.pieces = pieces
        self.start = start
        self.end = end
        self.children: dict[int, Node] = {}
        self.cov: list[Coverage] = [[] for _ in range(slots)]


@dataclass
class Inserted:
    """What inserting a prompt found out."""

    lcp: int  # longest common prefix with every prompt inserted before
    path: list[Node]  # nodes from the root down; the last one ends where the prompt ends
    offsets: np.ndarray  # offsets[k] = tokens before block k; offsets[-1] = prompt length

    @property
    def tokens(self) -> int:
        return int(self.offsets[-1])


class PrefixTree:
    """All prompts of a run inserted so far; :meth:`insert` returns a prompt's LCP with them.

    A prompt usually repeats its predecessor's blocks up to some block, so the walk starts
    where the previous prompt's path stops agreeing with it (one numpy compare of block
    ids, a bisection on the path) instead of at the root: without that, an append-only
    run — whose previous prompt always ends with the generation prompt, where the next
    prompt has its new assistant block — grows a chain of one node per call that every
    later call would walk again.
    """

    def __init__(self, store: BlockStore, slots: int = 0) -> None:
        self.store = store
        self.slots = slots
        self.root = Node([], 0, 0, slots)
        self.nodes: list[Node] = []  # every node but the root, in creation order
        self._lengths = np.zeros(0, dtype=np.int64)
        self._last: tuple[np.ndarray, list[Node], list[int]] | None = None

    def _new(self, pieces: list[Piece], start: int, end: int) -> Node:
        node = Node(pieces, start, end, self.slots)
        self.nodes.append(node)
        return node

    def insert(self, blocks: Sequence[int]) -> Inserted:
        """Add a prompt (block ids) and report its LCP with the prompts added before."""
        arrays = self.store.arrays
        if len(self._lengths) < len(arrays):
            extra = [a.shape[0] for a in arrays[len(self._lengths) :]]
            self._lengths = np.concatenate([self._lengths, np.asarray(extra, dtype=np.int64)])
        ids = np.asarray(blocks, dtype=np.int64)
        offsets = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(self._lengths[ids], out=offsets[1:])
        total = int(offsets[-1])
        node, path = self.root, []
        if self._last is not None:
            last_ids, last_path, last_ends = self._last
            n = min(len(ids), len(last_ids))
            diff = np.flatnonzero(ids[:n] != last_ids[:n])
            agreed = int(offsets[diff[0] if diff.size else n])
            j = bisect.bisect_right(last_ends, agreed)
            if j:
                node, path = last_path[j - 1], last_path[:j]
        depth = node.end
        k = bisect.bisect_right(offsets, depth) - 1  # the block holding token ``depth`` (never an empty one)
        q: list[Piece] = []
        if k < len(ids):
            first = int(ids[k])
            q.append((first, depth - int(offsets[k]), int(self._lengths[first])))
            q += [(b, 0, int(self._lengths[b])) for b in blocks[k + 1 :] if self._lengths[b]]
        lcp = self._walk(node, depth, q, path, total)
        self._last = (ids, path, [nd.end for nd in path])
        return Inserted(lcp, path, offsets)

    def _walk(self, node: Node, depth: int, q: list[Piece], path: list[Node], total: int) -> int:
        """Walk ``q`` (the prompt's pieces from ``depth`` on) down from ``node``, adding
        what is new; extend ``path``; return the LCP."""
        arrays = self.store.arrays
        qi, qo = 0, 0
        while qi < len(q):
            b, lo, hi = q[qi]
            first = int(arrays[b][lo + qo])
            child = node.children.get(first)
            if child is None:
                leaf = self._new([(b, lo + qo, hi), *q[qi + 1 :]], depth, total)
                node.children[first] = leaf
                path.append(leaf)
                return depth
            length = child.end - child.start
            if qo == 0 and child.pieces == q[qi : qi + len(child.pieces)]:
                matched, qi = length, qi + len(child.pieces)  # the whole label, one list compare
            else:
                matched, qi, qo = self._match(child.pieces, q, qi, qo)
            if matched == length:
                depth += matched
                node = child
                path.append(child)
                continue
            mid = self._split(node, child, matched)
            path.append(mid)
            if qi < len(q):
                b, lo, hi = q[qi]
                leaf = self._new([(b, lo + qo, hi), *q[qi + 1 :]], mid.end, total)
                mid.children[int(arrays[b][lo + qo])] = leaf
                path.append(leaf)
            return mid.end
        return depth

    def _match(self, label: list[Piece], q: list[Piece], qi: int, qo: int) -> tuple[int, int, int]:
        """Tokens of ``label`` matched by the prompt from piece ``qi`` offset ``qo``; the
        prompt's position after them."""
        arrays = self.store.arrays
        matched = 0
        for lb, llo, lhi in label:
            lpos = llo
            while lpos < lhi:
                if qi >= len(q):
                    return matched, qi, qo
                qb, qlo, qhi = q[qi]
                qpos = qlo + qo
                m = min(lhi - lpos, qhi - qpos)
                k = m if (lb == qb and lpos == qpos) else common_prefix(arrays[lb], lpos, arrays[qb], qpos, m)
                matched += k
                lpos += k
                qo += k
                if qlo + qo == qhi:
                    qi, qo = qi + 1, 0
                if k < m:
                    return matched, qi, qo
        return matched, qi, qo

    def _split(self, parent: Node, child: Node, x: int) -> Node:
        """Cut ``child``'s edge after ``x`` tokens; the new node in between is returned."""
        head: list[Piece] = []
        rest: list[Piece] = []
        left = x
        for b, lo, hi in child.pieces:
            if left >= hi - lo:
                head.append((b, lo, hi))
                left -= hi - lo
            elif left > 0:
                head.append((b, lo, lo + left))
                rest.append((b, lo + left, hi))
                left = 0
            else:
                rest.append((b, lo, hi))
        cut = child.start + x
        mid = self._new(head, child.start, cut)
        for s, cov in enumerate(child.cov):
            upper = [(e, t) for e, t in cov if e < cut]
            deeper = [(e, t) for e, t in cov if e >= cut]
            if deeper:
                upper.append((cut, deeper[0][1]))
            mid.cov[s] = upper
            child.cov[s] = [(e, t) for e, t in deeper if e > cut]
        child.pieces = rest
        child.start = cut
        first_head = head[0]
        first_rest = rest[0]
        arrays = self.store.arrays
        parent.children[int(arrays[first_head[0]][first_head[1]])] = mid
        mid.children[int(arrays[first_rest[0]][first_rest[1]])] = child
        return mid
