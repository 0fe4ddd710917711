"""Token-level deletion: remove a random share of a text's tokens, keep the rest in order.

Tokens are the model's (:mod:`forgetting.prompt.tokenizer`, Qwen's byte-level BPE). Two ways to
draw the removed tokens (config ``deletion.token_draw``):

``exact`` (default)
    exactly ``round(n · X / 100)`` of the ``n`` tokens (half rounds up), chosen uniformly
    without replacement — every message loses the configured share, no sampling noise.
``bernoulli``
    each token independently with probability ``X / 100`` — the share varies around X.

Decoding a subset of byte-level tokens: a token may hold only part of a multi-byte UTF-8
character (CJK text, emoji, box-drawing characters). The kept tokens are decoded run by
run — a run being consecutive tokens of the original — and bytes of a character cut by a
run's edge are dropped. So a character whose bytes span a kept and a removed token is
removed whole; no replacement character (U+FFFD) and no character that was never in the
text can appear. ASCII text (the bulk of code and shell output) takes a one-shot path.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from forgetting.prompt import tokenizer

TOKEN_DRAWS: tuple[str, ...] = ("exact", "bernoulli")


def removed_count(n: int, amount: float) -> int:
    """Tokens the ``exact`` draw removes from ``n`` at ``amount`` percent (half rounds up)."""
    return min(n, int(np.floor(n * float(amount) / 100.0 + 0.5)))


def removal_mask(n: int, amount: float, generator: np.random.Generator, draw: str = "exact") -> np.ndarray:
    """A boolean mask over ``n`` token positions; ``True`` marks a removed token."""
    mask = np.zeros(n, dtype=bool)
    if n == 0:
        return mask
    if draw == "exact":
        k = removed_count(n, amount)
        mask[generator.permutation(n)[:k]] = True
    elif draw == "bernoulli":
        mask = generator.random(n) < float(amount) / 100.0
    else:
        raise ValueError(f"unknown token draw {draw!r}; allowed: {', '.join(TOKEN_DRAWS)}")
    return mask


def kept_text(ids: Sequence[int], removed: np.ndarray, *, ascii_only: bool = False) -> str:
    """The text of the tokens of ``ids`` not marked in ``removed``, in their original order."""
    keep = np.flatnonzero(~removed)
    if keep.size == 0:
        return ""
    enc = tokenizer.encoding()
    if ascii_only:
        return enc.decode_bytes([ids[i] for i in keep.tolist()]).decode("ascii")
    out = []
    starts = np.flatnonzero(np.diff(keep) != 1) + 1
    for run in np.split(keep, starts):
        lo, hi = int(run[0]), int(run[-1]) + 1
        out.append(enc.decode_bytes(list(ids[lo:hi])).decode("utf-8", errors="ignore"))
    return "".join(out)
