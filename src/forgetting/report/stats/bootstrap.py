"""Vectorised paired bootstrap over tasks (SPEC §6).

A resample draws ``n`` task indices with replacement. Every statistic in this package is a
function of the *multiplicity* of each task in the resample, so a whole bootstrap is one
integer matrix ``W`` of shape ``(resamples, n_tasks)`` (``W[r, t]`` = how often task ``t`` was
drawn in resample ``r``), and each statistic is computed for all resamples at once:

* a sum over tasks of per-task values ``x`` is ``W @ x``;
* a median over runs, each run weighted by its task's multiplicity, is
  :func:`weighted_median` (a matrix product, a cumulative sum and a search per row — no loop
  over resamples).

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
    "subset_weights",
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


def subset_weights(mask: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """The bootstrap's multiplicities when only the tasks in ``mask`` (n,) take part: each
    resample draws ``K = mask.sum()`` tasks with replacement from those ``K`` (the same draws,
    ``resample_weights(K, …)``, scattered into their columns), the other columns 0. With every
    task in the mask it equals :func:`resample_weights` of all of them, so a study without
    excluded or missing tasks resamples exactly as before. Resampling all ``n`` tasks and
    giving the absent ones zero weight instead would make the effective sample size of a
    resample random (binomial around ``K``) rather than ``K``, widening the intervals."""
    mask = np.asarray(mask, dtype=bool)
    k = int(mask.sum())
    out = np.zeros((resamples, mask.size), dtype=np.int32)
    if k:
        out[:, mask] = resample_weights(k, resamples, seed)
    return out


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
    NaN.

    How: the distinct values ``v_1 < … < v_V`` and a task × value count matrix ``M`` (n, V);
    then ``W @ M`` is every resample's count of each distinct value, its cumulative sum along
    the values locates the two middle ranks, and one search per row finds them — matrix
    products and array operations over all resamples (in blocks of rows, to bound memory),
    never a Python loop over them. Turn counts and distances have few distinct values, so
    ``V`` is small.
    """
    values = np.asarray(values, dtype=np.float64)
    task_of = np.asarray(task_of, dtype=np.int64)
    keep = ~np.isnan(values)
    values, task_of = values[keep], task_of[keep]
    resamples, n_tasks = weights.shape
    if values.size == 0:
        return np.full(resamples, np.nan)
    distinct, which = np.unique(values, return_inverse=True)
    counts = np.zeros((n_tasks, distinct.size))
    np.add.at(counts, (task_of, which.ravel()), 1.0)
    used = counts.any(axis=0)  # (all are, unless a value's tasks are all masked later)
    distinct, counts = distinct[used], counts[:, used]
    out = np.empty(resamples)
    block = max(1, _BLOCK_ELEMENTS // max(distinct.size, n_tasks))
    for first in range(0, resamples, block):
        out[first : first + block] = _median_block(distinct, counts, weights[first : first + block])
    return out


def _median_block(distinct: np.ndarray, counts: np.ndarray, weights: np.ndarray) -> np.ndarray:
    rows_n, size = weights.shape[0], distinct.size
    # integer-valued floats: exact up to 2**53
    w = weights if weights.dtype == np.float64 else weights.astype(np.float64)
    cum = np.cumsum(w @ counts, axis=1)  # (rows, V), rows nondecreasing
    total = cum[:, -1].copy()
    # a row-wise searchsorted on one flat array: shift row r by r * (max total + 1)
    stride = float(total.max()) + 1.0
    offsets = np.arange(rows_n, dtype=np.float64) * stride
    cum += offsets[:, None]
    flat = cum.ravel()
    base = np.arange(rows_n, dtype=np.int64) * size
    lower_rank = np.floor((total - 1.0) / 2.0)  # 0-based ranks of the two middle elements
    upper_rank = np.floor(total / 2.0)
    lo = np.clip(np.searchsorted(flat, lower_rank + offsets, side="right") - base, 0, size - 1)
    hi = np.clip(np.searchsorted(flat, upper_rank + offsets, side="right") - base, 0, size - 1)
    out = (distinct[lo] + distinct[hi]) / 2.0
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
