"""Token-level deletion: the share removed, the order kept, split UTF-8 characters."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forgetting.deletion import draws
from forgetting.deletion.tokens import kept_text, removal_mask, removed_count
from forgetting.prompt import tokenizer


def test_exact_removes_round_half_up_of_n_times_x():
    assert [removed_count(n, 25) for n in (0, 1, 2, 3, 4, 6, 10)] == [0, 0, 1, 1, 1, 2, 3]  # 0.5 → 1, 1.5 → 2
    assert removed_count(7, 50) == 4 and removed_count(8, 75) == 6 and removed_count(5, 100) == 5
    for n in (1, 13, 1000):
        mask = removal_mask(n, 50, draws.rng(3, n), "exact")
        assert mask.sum() == removed_count(n, 50)


@pytest.mark.parametrize("p", [25, 50, 75])
def test_bernoulli_share_converges_with_length(p):
    # the tolerance is 4 standard deviations of the share: it tightens as 1/sqrt(n)
    for n in (100, 1_000, 10_000, 100_000):
        tol = 4 * math.sqrt(p / 100 * (1 - p / 100) / n)
        for seed in range(5):
            share = removal_mask(n, p, draws.rng(seed, "b", n), "bernoulli").mean()
            assert abs(share - p / 100) <= tol
    assert tol < 0.007  # at 100k tokens the share is within 0.7 points


def test_draws_are_keyed_not_sequential():
    a = removal_mask(500, 50, draws.rng(9, "token", 3, "tool_output", 1))
    draws.rng(9, "something else").random(1000)  # other draws in between change nothing
    b = removal_mask(500, 50, draws.rng(9, "token", 3, "tool_output", 1))
    c = removal_mask(500, 50, draws.rng(9, "token", 3, "tool_output", 2))
    assert (a == b).all() and not (a == c).all()


def test_kept_tokens_stay_in_their_original_order():
    text = " ".join(f"w{i}" for i in range(200))
    ids = tokenizer.encode(text)
    mask = removal_mask(len(ids), 50, draws.rng(1, "order"))
    kept_ids = [t for t, m in zip(ids, mask, strict=True) if not m]
    assert kept_text(ids, mask, ascii_only=True) == tokenizer.decode(kept_ids)
    assert kept_text(ids, mask) == tokenizer.decode(kept_ids)
    assert kept_text(ids, np.zeros(len(ids), dtype=bool)) == text
    assert kept_text(ids, np.ones(len(ids), dtype=bool)) == ""


def test_a_character_cut_by_the_draw_is_removed_whole():
    text = "🫠"  # 4 UTF-8 bytes in 3 byte-level tokens
    ids = tokenizer.encode(text)
    assert len(ids) == 3
    for k in range(len(ids)):
        mask = np.zeros(len(ids), dtype=bool)
        mask[k] = True
        assert kept_text(ids, mask) == ""  # never a broken byte, never U+FFFD
    ids = tokenizer.encode("a🫠b")
    mask = np.array([t in tokenizer.encode("🫠")[1:2] for t in ids])
    assert kept_text(ids, mask) == "ab"


@settings(max_examples=200, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from([*list("ab c\n"), "é", "文", "🙂", "ж", "→", "́", "中", "🫠", "𓀀"]),
        max_size=80,
    ),
    st.integers(0, 2**32),
    st.sampled_from([25, 50, 75]),
)
def test_decoding_any_subset_gives_a_subsequence_without_replacement_chars(text, seed, amount):
    ids = tokenizer.encode(text)
    mask = removal_mask(len(ids), amount, draws.rng(seed), "bernoulli")
    out = kept_text(ids, mask)
    assert "\ufffd" not in out
    it = iter(text)
    assert all(ch in it for ch in out)
