"""The vectorised bootstrap primitives against explicit computations and scipy.stats.bootstrap."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sstats

from forgetting.report.stats.bootstrap import (
    bootstrap_p,
    percentile_interval,
    resample_indices,
    resample_weights,
    weighted_median,
    weights_from_indices,
)
from forgetting.report.stats.holm import holm_adjust, holm_reject


def test_weights_count_each_drawn_task_and_repeat_with_the_seed():
    idx = resample_indices(7, 300, seed=3)
    w = weights_from_indices(idx, 7)
    assert w.shape == (300, 7) and (w.sum(axis=1) == 7).all()
    for r in (0, 17, 299):
        assert np.array_equal(w[r], np.bincount(idx[r], minlength=7))
    assert np.array_equal(resample_weights(7, 300, 3), w)
    assert not np.array_equal(resample_weights(7, 300, 4), w)


def test_weighted_median_equals_numpy_median_of_the_expanded_resample():
    rng = np.random.default_rng(0)
    n = 9
    values = rng.integers(0, 30, 60).astype(float)
    values[[3, 11]] = np.nan  # left out
    task_of = rng.integers(0, n, 60)
    w = resample_weights(n, 400, seed=1)
    w[5] = 0  # an empty resample
    w[6] = 0
    w[6, task_of[0]] = 1  # a resample holding one task only
    got = weighted_median(values, task_of, w)
    for r in range(400):
        expanded = np.repeat(values, w[r][task_of])
        expanded = expanded[~np.isnan(expanded)]
        want = np.median(expanded) if expanded.size else np.nan
        assert got[r] == pytest.approx(want, nan_ok=True), r


def test_weighted_median_in_blocks_equals_one_block(monkeypatch):
    import forgetting.report.stats.bootstrap as b

    rng = np.random.default_rng(2)
    values, task_of = rng.normal(size=50), rng.integers(0, 6, 50)
    w = resample_weights(6, 1000, seed=9)
    whole = weighted_median(values, task_of, w)
    monkeypatch.setattr(b, "_BLOCK_ELEMENTS", 77)
    assert np.array_equal(weighted_median(values, task_of, w), whole)


def test_percentile_interval_is_numpys_linear_percentile_and_copes_with_nan_and_inf():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(999, 3))
    lo, hi = percentile_interval(x, 0.9)
    assert np.allclose(lo, np.percentile(x, 5, axis=0)) and np.allclose(hi, np.percentile(x, 95, axis=0))
    y = np.r_[x[:, 0], [np.nan] * 50]
    assert percentile_interval(y, 0.9) == pytest.approx(
        (np.percentile(x[:, 0], 5), np.percentile(x[:, 0], 95))
    )
    z = np.r_[np.ones(10), np.full(10, np.inf)]
    assert percentile_interval(z, 0.95) == (1.0, np.inf)


def test_bootstrap_p_is_small_only_when_the_interval_excludes_the_null():
    rng = np.random.default_rng(5)
    for shift in np.linspace(0, 4, 21):
        s = rng.normal(shift, 1, size=2000)
        p = bootstrap_p(s, 0.0)
        lo, hi = percentile_interval(s, 0.95)
        if p < 0.05:
            assert lo > 0 or hi < 0
    assert bootstrap_p(np.full(100, 3.0), 3.0) == 1.0
    assert bootstrap_p(np.full(99, 3.0), 0.0) == pytest.approx(2 / 100)


def test_holm_by_hand():
    p = [0.01, 0.04, 0.03, 0.005]
    # sorted 0.005·4 = 0.02, 0.01·3 = 0.03, 0.03·2 = 0.06, 0.04·1 = 0.04 → running max 0.06
    assert holm_adjust(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm_reject(p, 0.05).tolist() == [True, False, False, True]
    # a NaN is no test: m = 2
    assert holm_adjust([0.02, np.nan, 0.03]) == pytest.approx([0.04, np.nan, 0.04], nan_ok=True)
    assert holm_reject([0.02, np.nan, 0.03], 0.05).tolist() == [True, False, True]


# --- agreement with scipy.stats.bootstrap (paired, percentile) -----------------------------------

N_TASKS, REPEATS, R = 40, 5, 10_000


@pytest.fixture(scope="module")
def paired_data():
    rng = np.random.default_rng(11)
    p = rng.uniform(0.2, 0.95, N_TASKS)
    base_solved = (rng.random((N_TASKS, REPEATS)) < p[:, None]).astype(float)
    conf_solved = (rng.random(N_TASKS) < p - 0.1).astype(float)
    base_turns = rng.integers(10, 120, (N_TASKS, REPEATS)).astype(float)
    conf_turns = (base_turns[:, 0] * rng.uniform(1.0, 1.8, N_TASKS)).round()
    base_cost = rng.gamma(2.0, 1.0, (N_TASKS, REPEATS))
    conf_cost = base_cost.mean(axis=1) * rng.uniform(0.9, 1.6, N_TASKS)
    return base_solved, conf_solved, base_turns, conf_turns, base_cost, conf_cost


def _scipy_ci(statistic) -> tuple[float, float, np.ndarray]:
    """scipy's paired percentile bootstrap over task indices (the index sample is the pairing)."""
    res = sstats.bootstrap(
        (np.arange(N_TASKS),),
        statistic,
        vectorized=True,
        paired=True,
        n_resamples=R,
        method="percentile",
        confidence_level=0.95,
        rng=np.random.default_rng(12345),
    )
    return res.confidence_interval.low, res.confidence_interval.high, res.bootstrap_distribution


def _ours(samples: np.ndarray) -> tuple[float, float]:
    return percentile_interval(samples, 0.95)


def _close(ours, theirs, spread):
    # Monte-Carlo error of a 2.5 % quantile with 10,000 resamples is ≈ 0.03 bootstrap SDs per
    # run; the two runs use independent draws, so allow 0.2 SD (≈ 5 standard errors)
    assert abs(ours[0] - theirs[0]) <= 0.2 * spread, (ours, theirs, spread)
    assert abs(ours[1] - theirs[1]) <= 0.2 * spread, (ours, theirs, spread)


def test_delta_tasks_solved_ci_agrees_with_scipy(paired_data):
    base_solved, conf_solved, *_ = paired_data
    base_mean = base_solved.mean(axis=1)

    def stat(idx, axis=-1):
        return conf_solved[idx].sum(axis=-1) - base_mean[idx].sum(axis=-1)

    lo, hi, dist = _scipy_ci(stat)
    w = resample_weights(N_TASKS, R, seed=1).astype(float)
    ours = w @ conf_solved - w @ base_mean
    _close(_ours(ours), (lo, hi), dist.std())


def test_median_turns_ratio_ci_agrees_with_scipy(paired_data):
    _, _, base_turns, conf_turns, _, _ = paired_data

    def stat(idx, axis=-1):
        idx = np.atleast_2d(idx)
        out = [
            np.median(conf_turns[i]) / np.median(base_turns[i].ravel()) for i in idx
        ]  # pooled baseline runs
        return np.array(out) if len(out) > 1 else out[0]

    lo, hi, dist = _scipy_ci(stat)
    w = resample_weights(N_TASKS, R, seed=2)
    tasks = np.arange(N_TASKS)
    ours = weighted_median(conf_turns, tasks, w) / weighted_median(
        base_turns.ravel(), np.repeat(tasks, REPEATS), w
    )
    _close(_ours(ours), (lo, hi), dist.std())


def test_total_cost_ratio_ci_agrees_with_scipy(paired_data):
    *_, base_cost, conf_cost = paired_data
    base_mean = base_cost.mean(axis=1)

    def stat(idx, axis=-1):
        return conf_cost[idx].sum(axis=-1) / base_mean[idx].sum(axis=-1)

    lo, hi, dist = _scipy_ci(stat)
    w = resample_weights(N_TASKS, R, seed=3).astype(float)
    _close(_ours((w @ conf_cost) / (w @ base_mean)), (lo, hi), dist.std())
