"""An emulation of vLLM's automatic prefix caching, for the ``cached_tokens`` the scripted
model reports.

vLLM splits a prompt into full blocks of 16 tokens and identifies each block by a hash
chained over all blocks before it, so a block hits only when the whole prefix up to it was
seen before. A request's cached tokens are 16 × the number of leading blocks found; at
least the last prompt token is always computed, so only blocks within the first n − 1 tokens
can hit. Blocks of every prompt are kept, least recently used evicted first, shared by all
requests to the server (as on a real server, runs share their system-prompt blocks).
Differences from vLLM, documented in config/README.md: blocks of generated tokens are not
cached, and the capacity is a block count, not GPU memory.
"""

from __future__ import annotations

import hashlib
import threading
from array import array
from collections import OrderedDict
from collections.abc import Sequence

BLOCK_SIZE = 16


class PrefixCache:
    def __init__(self, max_blocks: int = 65536, block_size: int = BLOCK_SIZE) -> None:
        if max_blocks < 1 or block_size < 1:
            raise ValueError("max_blocks and block_size must be positive")
        self.max_blocks = max_blocks
        self.block_size = block_size
        self._blocks: OrderedDict[bytes, None] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._blocks)

    def _chain(self, ids: Sequence[int]) -> list[bytes]:
        out = []
        parent = b""
        bs = self.block_size
        for start in range(0, len(ids) - bs + 1, bs):
            block = array("q", ids[start : start + bs]).tobytes()
            parent = hashlib.blake2b(parent + block, digest_size=16).digest()
            out.append(parent)
        return out

    def lookup_and_store(self, ids: Sequence[int]) -> int:
        """The number of cached prompt tokens for ``ids``; then cache its full blocks."""
        chain = self._chain(ids)
        hittable = max(0, (len(ids) - 1) // self.block_size)
        with self._lock:
            hits = 0
            for h in chain[:hittable]:
                if h not in self._blocks:
                    break
                hits += 1
            for h in chain:
                self._blocks[h] = None
                self._blocks.move_to_end(h)
            while len(self._blocks) > self.max_blocks:
                self._blocks.popitem(last=False)
        return hits * self.block_size
