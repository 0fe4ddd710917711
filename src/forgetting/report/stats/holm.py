"""Holm–Bonferroni step-down adjustment (Holm 1979)."""

from __future__ import annotations

import numpy as np


def holm_adjust(pvalues: np.ndarray | list[float]) -> np.ndarray:
    """Holm-adjusted p-values, in the input order.

    Sorting the ``m`` defined p-values ascending, the i-th (1-based) becomes
    ``max_{j ≤ i} min(1, (m − j + 1) · p_(j))``; reject where the adjusted value is below α.
    NaN entries (no test) stay NaN and do not count towards ``m``. Ties keep input order.
    """
    p = np.asarray(pvalues, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    defined = np.flatnonzero(~np.isnan(p))
    m = defined.size
    if m == 0:
        return out
    order = defined[np.argsort(p[defined], kind="stable")]
    factors = m - np.arange(m)
    stepped = np.minimum(1.0, factors * p[order])
    out[order] = np.maximum.accumulate(stepped)
    return out


def holm_reject(pvalues: np.ndarray | list[float], alpha: float) -> np.ndarray:
    """Which hypotheses Holm rejects at family-wise level ``alpha`` (NaN → False)."""
    adjusted = holm_adjust(pvalues)
    with np.errstate(invalid="ignore"):
        return np.where(np.isnan(adjusted), False, adjusted < alpha)
