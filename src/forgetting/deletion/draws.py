"""Keyed random draws: every draw is a pure function of the run seed and a key.

A draw never depends on the call it happens in, on the order draws are made, or on
anything else in the history, so a turn selected (or a token removed) in call *n* is
selected (removed) again in every later call. Keys are hashed with SHA-256, which is
stable across Python versions, platforms and processes (unlike ``hash()``).
"""

from __future__ import annotations

import functools
import hashlib

import numpy as np


def _digest(seed: int, key: tuple[object, ...]) -> bytes:
    text = "/".join([str(int(seed)), *map(str, key)])
    return hashlib.sha256(text.encode()).digest()


@functools.lru_cache(maxsize=1 << 16)
def unit(seed: int, *key: object) -> float:
    """A uniform number in [0, 1) for ``(seed, *key)`` (memoized: asked again at every call)."""
    return int.from_bytes(_digest(seed, key)[:8], "big") / 2.0**64


def rng(seed: int, *key: object) -> np.random.Generator:
    """A NumPy generator seeded by ``(seed, *key)`` (PCG64, 128 bits of the hash)."""
    return np.random.default_rng(int.from_bytes(_digest(seed, key)[:16], "big"))
