"""Keyed random draws: every draw is a pure function of the run seed and a key.

A draw never depends on the call it happens in, on the order draws are made, or on
anything else in the history, so a turn selected (or a token removed) in call *n* is
selected (removed) again in every later call. Keys are hashed by :mod:`forgetting.foundation.seeds`.
"""

from __future__ import annotations

import functools

import numpy as np

from forgetting.foundation import seeds


@functools.lru_cache(maxsize=1 << 16)
def unit(seed: int, *key: object) -> float:
    """A uniform number in [0, 1) for ``(seed, *key)`` (memoized: asked again at every call)."""
    return seeds.unit(int(seed), *key)


def rng(seed: int, *key: object) -> np.random.Generator:
    """A NumPy generator seeded by ``(seed, *key)`` (PCG64, 128 bits of the hash)."""
    return np.random.default_rng(seeds.seed128(int(seed), *key))
