"""Vectorised paired bootstrap over tasks (SPEC §6).

A resample draws ``n`` task indices with replacement. Every statistic in this package is a
function of the *multiplicity* of each task in the resample, so a whole bootstrap is one
integer matrix ``W`` of shape ``(resamples, n_tasks)`` (``W[r, t]`` = how often task ``t`` was
drawn in resample ``r``), and each statistic is computed for all resamples at once:

* a sum over tasks of per-task values ``x`` is ``W @ x``;
* a median over runs, each run weighted by its task's multiplicity, is
  :func:`weighted_median` (a cumulative sum and a search per row — no loop over resamples).

The point estimate is the same statistic with ``W`` a single row of ones, so estimate and
bootstrap share one implementation. The same ``W`` serves every evaluation of a study, which
is what makes comparisons between configurations paired.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "bootstrap_p",
    "ones_weights",
    "percentile_interval",
    "resample_indices",
    "resample_weights",
    "weighted_median",
]


def resample_indices(n_tasks: int, resamples: int, seed: int) -> np.ndarray:
    """``(resamples, n_tasks)`` task indices drawn with replacement (numpy's PCG64, ``seed``)."""
    if n_tasks < 1:
        raise ValueError("the bootstrap needs at least one task")
    rng = np.random.default_rng(seed)
    return rng.integers(0, n_tasks, size=(resamples, n_tasks), dtype=np.int64)


def weights_from_indices(indices: np.ndarray, n_tasks: int) -> np.ndarray:
    """Multiplicity of every task in every resample, ``(resamples, n_tasks)`` int32."""
    resamples = indices.shape[0]
    flat = (indices + (np.arange(resamples, dtype=np.int64) * n_tasks)[:, None]).ravel()
    counts = np.bincount(flat, minlength=resamples * n_tasks)
    return counts.reshape(resamples, n_tasks).astype(np.int32)


def resample_weights(n_tasks: int, resamples: int, seed: int) -> np.ndarray:
    """The bootstrap's task multiplicities; see the module docstring."""
    return weights_from_indices(resample_indices(n_tasks, resamples, seed), n_tasks)


def ones_weights(n_tasks: int) -> np.ndarray:
    """The original sample as a one-row weight matrix (every task once)."""
    return np.ones((1, n_tasks), dtype=np.int32)


#: resamples × values handled per block in :func:`weighted_median` (bounds its memory)
_BLOCK_ELEMENTS = 4_000_000


def weighted_median(values: np.ndarray, task_of: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per resample, the median of ``values`` with each value repeated ``weights[r, task_of[i]]`` times.

    ``values`` (m,) are run-level values (NaNs are left out), ``task_of`` (m,) their task
    indices into the columns of ``weights`` (R, n). The median is numpy's: the middle element,
    or the mean of the two middle elements of an even count. A resample with no values gives
    NaN. Equal (value, task) pairs are merged first; then one cumulative sum over the sorted
    values and a row-wise search find the two middle ranks of every resample — vectorised
    over resamples (in blocks of rows, to bound memory), never a Python loop over them.
    """
    values = np.asarray(values, dtype=np.float64)
    task_of = np.asarray(task_of, dtype=np.int64)
    keep = ~np.isnan(values)
    values, task_of = values[keep], task_of[keep]
    resamples = weights.shape[0]
    if values.size == 0:
        return np.full(resamples, np.nan)
    # sort by value (then task) and merge equal (value, task) pairs into one weighted entry
    order = np.lexsort((task_of, values))
    v, t = values[order], task_of[order]
    starts = np.flatnonzero(np.r_[True, (v[1:] != v[:-1]) | (t[1:] != t[:-1])])
    mult = np.diff(np.r_[starts, v.size]).astype(np.int64)
    sorted_values, tasks = v[starts], t[starts]
    m = sorted_values.size
    out = np.empty(resamples)
    block = max(1, _BLOCK_ELEMENTS // m)
    for first in range(0, resamples, block):
        out[first : first + block] = _median_block(sorted_values, tasks, mult, weights[first : first + block])
    return out


def _median_block(
    sorted_values: np.ndarray, tasks: np.ndarray, mult: np.ndarray, weights: np.ndarray
) -> np.ndarray:
    rows_n, m = weights.shape[0], sorted_values.size
    cum = np.cumsum(weights[:, tasks].astype(np.int64) * mult[None, :], axis=1)  # rows nondecreasing
    total = cum[:, -1]
    # a row-wise searchsorted on one flat array: shift row r by r * (max total + 1)
    stride = int(total.max()) + 1
    offsets = np.arange(rows_n, dtype=np.int64) * stride
    flat = (cum + offsets[:, None]).ravel()
    base = np.arange(rows_n, dtype=np.int64) * m
    lower_rank = (total - 1) // 2  # 0-based ranks of the two middle elements
    upper_rank = total // 2
    lo = np.clip(np.searchsorted(flat, lower_rank + offsets, side="right") - base, 0, m - 1)
    hi = np.clip(np.searchsorted(flat, upper_rank + offsets, side="right") - base, 0, m - 1)
    out = (sorted_values[lo] + sorted_values[hi]) / 2.0
    out[total == 0] = np.nan
    return out


def _sorted_valid(samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Samples sorted along axis 0 with NaNs last, and the count of non-NaN per column."""
    s = np.sort(samples, axis=0)  # NaN sorts last
    valid = np.sum(~np.isnan(samples), axis=0)
    return s, valid


def percentile_interval(samples: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile confidence interval(s) of bootstrap ``samples`` along axis 0.

    Linear interpolation between order statistics, as ``numpy.percentile`` (and so
    ``scipy.stats.bootstrap(method="percentile")``) does; NaN samples (a statistic undefined in
    some resample, e.g. a rate with no reads) are left out; an interval over infinite values
    stays infinite rather than turning into NaN.
    """
    samples = np.asarray(samples, dtype=np.float64)
    squeeze = samples.ndim == 1
    if squeeze:
        samples = samples[:, None]
    s, valid = _sorted_valid(samples)
    cols = np.arange(samples.shape[1])
    bounds = []
    for q in ((1.0 - confidence) / 2.0, (1.0 + confidence) / 2.0):
        h = (valid - 1) * q
        lo_i = np.floor(h).astype(np.int64)
        hi_i = np.minimum(lo_i + 1, np.maximum(valid - 1, 0))
        lo_i = np.maximum(lo_i, 0)
        a, b = s[lo_i, cols], s[hi_i, cols]
        frac = h - np.floor(h)
        with np.errstate(invalid="ignore"):
            value = np.where(a == b, a, a + (b - a) * frac)
        value = np.where(valid > 0, value, np.nan)
        bounds.append(value)
    lo, hi = bounds
    if squeeze:
        return lo[0], hi[0]
    return lo, hi


def bootstrap_p(samples: np.ndarray, null: float) -> np.ndarray:
    """Two-sided bootstrap p-value of ``null`` along axis 0.

    ``p = min(1, 2 (min(#{θ* ≤ null}, #{θ* ≥ null}) + 1) / (B + 1))`` over the ``B`` defined
    samples: the add-one form (Davison & Hinkley 1997, eq. 4.11) never gives 0. A null inside
    the bootstrap distribution's bulk gives p near 1; ``p < α`` implies that the percentile
    interval at level ``1 − α`` excludes the null, so Holm's decisions are a subset of the raw ones.
    """
    samples = np.asarray(samples, dtype=np.float64)
    squeeze = samples.ndim == 1
    if squeeze:
        samples = samples[:, None]
    valid = ~np.isnan(samples)
    n = valid.sum(axis=0)
    le = np.sum(valid & (samples <= null), axis=0)
    ge = np.sum(valid & (samples >= null), axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.minimum(1.0, 2.0 * (np.minimum(le, ge) + 1.0) / (n + 1.0))
    p = np.where(n > 0, p, np.nan)
    return p[0] if squeeze else p
