"""Hand-computed cases of SPEC §5's split (cached / new / re-billed) and of each pricing rule.

Prompts are built from tiny token blocks so every number can be checked on paper:
S = system (3 tokens), U = task (2), A = assistant blocks, which start with the two tokens
of the generation prompt G = [7, 8] exactly as ``<|im_start|>assistant\\n`` starts an
assistant block in the real chat format, O = tool outputs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from forgetting.cost import PricingProfile, cost_prompts
from forgetting.cost.prompts import BlockStore, CallPrompt, RunPrompts

S, U, G = [1, 1, 1], [2, 2], [7, 8]
A1, O1, A2, O2, A3, O3 = [7, 8, 3], [4, 4, 4, 4], [7, 8, 5], [6, 6], [7, 8, 10], [11]
O1_REWRITTEN, O2_REWRITTEN = [4, 4, 9], [6, 12]
X = [13, 13, 13, 13]

PAPER = PricingProfile("paper", input=0.45, cached_input=0.09, output=2.25, cache_write=0.45)


def run_of(prompts: list[list[list[int]]], times: list[float] | None = None, output: int = 10) -> RunPrompts:
    store = BlockStore()
    gen = store.intern(G)
    run = RunPrompts("hand", Path("hand"), "calllog", store)
    for i, messages in enumerate(prompts):
        blocks = (*(store.intern(m) for m in messages), gen)
        run.calls.append(CallPrompt(i + 1, blocks, len(messages), output, time=times[i] if times else None))
    return run


def rows(run: RunPrompts, profile: PricingProfile = PAPER) -> list[tuple[int, int, int, int, int]]:
    """(prompt, cached, new, rebilled, written) per call."""
    table = cost_prompts(run, [profile]).calls.to_pylist()
    return [
        (
            r["prompt_tokens"],
            r["cached_tokens"],
            r["new_tokens"],
            r["rebilled_tokens"],
            r["cache_write_tokens"],
        )
        for r in table
    ]


APPEND_ONLY = [[S, U], [S, U, A1, O1], [S, U, A1, O1, A2, O2]]
ONE_REWRITE = [
    [S, U],
    [S, U, A1, O1],
    [S, U, A1, O1_REWRITTEN, A2, O2],
    [S, U, A1, O1_REWRITTEN, A2, O2, A3, O3],
]
EVERY_CALL = [
    [S, U],
    [S, U, A1, O1],
    [S, U, A1, O1_REWRITTEN, A2, O2],
    [S, U, A1, O1_REWRITTEN, A2, O2_REWRITTEN, A3, O3],
]
OLDER = [[S, U], [S, U, A1, O1], [S, U, X], [S, U, A1, O1, A2, O2]]


def test_append_only_history_has_no_rebilled_tokens_and_paper_costs():
    # P1 = S U G (7): nothing cached.  P2 = S U A1 O1 G (14): P1 is a prefix of P2 token by
    # token (G = head of A1), LCP 7; B = |S U| = 5, so 7 cached, 7 new.  P3 (19): LCP 14, B 12.
    assert rows(run_of(APPEND_ONLY)) == [(7, 0, 7, 0, 7), (14, 7, 7, 0, 7), (19, 14, 5, 0, 5)]
    result = cost_prompts(run_of(APPEND_ONLY), [PAPER])
    row = result.profile_row("paper")
    assert (row["prompt_tokens"], row["cached_tokens"], row["new_tokens"], row["rebilled_tokens"]) == (
        40,
        21,
        19,
        0,
    )
    # flat: (40·0.45 + 30·2.25)/1e6; caching-aware: (21·0.09 + 19·0.45 + 30·2.25)/1e6
    assert row["cost_flat"] == pytest.approx(85.5e-6, rel=1e-12)
    assert row["cost_cache"] == pytest.approx(77.94e-6, rel=1e-12)
    assert row["cost_cached"] == pytest.approx(1.89e-6) and row["cost_new"] == pytest.approx(8.55e-6)
    assert row["cost_output"] == pytest.approx(67.5e-6) and row["cost_cache_write"] == 0
    assert result.summary["cost_cache"] == row["cost_cache"]
    assert [c["cost_cache"] for c in result.calls.to_pylist()] == pytest.approx(
        [(7 * 0.45 + 22.5) / 1e6, (7 * 0.09 + 7 * 0.45 + 22.5) / 1e6, (14 * 0.09 + 5 * 0.45 + 22.5) / 1e6]
    )


@pytest.mark.parametrize(("run", "expected"), [
    # P3 = S U A1 O1' A2 O2 G (18): O1' = [4,4,9] shares [4,4] with O1, so LCP = 8 + 2 = 10;
    # B = |S U A1 O1'| = 11: 1 token re-billed (the rest of O1'), 7 new.
    # P4 (22) extends P3: LCP 18 (P3 + head of A3), B = 16.
    pytest.param(ONE_REWRITE, (22, 18, 4, 0, 4), id="one rewrite in the middle, rebilled once"),
    # P4 rewrites O2 as well: LCP with P3 = |S U A1 O1' A2| + [6] = 15; B = 16: 1 re-billed.
    pytest.param(EVERY_CALL, (22, 15, 6, 1, 7), id="rewrites in every call"),
])
def test_a_rewrite_is_rebilled_once(run, expected):
    assert rows(run_of(run)) == [
        (7, 0, 7, 0, 7),
        (14, 7, 7, 0, 7),
        (18, 10, 7, 1, 8),
        expected,
    ]


def test_prompt_matching_an_older_not_the_latest_prompt():
    # P3 = S U X G (11) branches off after S U: LCP 5; M = 4 positions, P3 has 3, so
    # B = |S U X| = 9 and X is re-billed (4 tokens beyond the LCP). P4 = S U A1 O1 A2 O2 G
    # shares only 5 tokens with the latest prompt P3 but 14 with the older P2.
    assert rows(run_of(OLDER)) == [(7, 0, 7, 0, 7), (14, 7, 7, 0, 7), (11, 5, 2, 4, 6), (19, 14, 5, 0, 5)]


def test_block_rounding_profile():
    blocks = PricingProfile("blocks", 0.45, 0.09, 2.25, 0.45, increment=4, recompute_last_token=True)
    # P1 (7): stores r(7) = 4. P2 (14): LCP 7 -> m = 4; hit 4; writes r(14) - 4 = 8; B = 5 ->
    # 1 re-billed, 9 new. P3 (19): LCP 14 -> m = 12; writes r(19) - 12 = 4; B = 12 -> 7 new.
    assert rows(run_of(APPEND_ONLY), blocks) == [(7, 0, 7, 0, 4), (14, 4, 9, 1, 8), (19, 12, 7, 0, 4)]


def test_block_rounding_recomputes_the_last_token_of_a_full_hit():
    prompt = [[1, 2, 3], [4, 5, 6]]  # 6 + 2 (G) = 8 tokens, twice
    with_rule = PricingProfile("b", 0.45, 0.09, 2.25, 0.45, increment=4, recompute_last_token=True)
    without = PricingProfile("b", 0.45, 0.09, 2.25, 0.45, increment=4)
    # second call: the whole prompt is cached (m = 8) but vLLM recomputes the last token,
    # so only r(7) = 4 tokens hit; nothing new is written either way
    assert rows(run_of([prompt, prompt]), with_rule)[1] == (8, 4, 2, 2, 0)
    assert rows(run_of([prompt, prompt]), without)[1] == (8, 8, 0, 0, 0)


def test_write_premium():
    premium = PricingProfile("premium", 0.45, 0.09, 2.25, cache_write=0.9)
    row = cost_prompts(run_of(APPEND_ONLY), [premium]).profile_row("premium")
    # written 7 + 7 + 5 = 19 tokens, each 0.45 dearer than input
    assert row["cache_write_tokens"] == 19
    assert row["cost_cache_write"] == pytest.approx(19 * 0.45 / 1e6)
    assert row["cost_cache"] == pytest.approx((21 * 0.09 + 19 * 0.45 + 19 * 0.45 + 30 * 2.25) / 1e6)


@pytest.mark.parametrize(("rule", "times", "expected"), [
    # P1 (7): writes r(7) = 6.  P2 (14): LCP 7 -> 6; writes 12 - 6.  P3 = S U X G (11): LCP 5,
    # below the minimum -> 0; writes r(11) = 9; B = 9 -> 9 re-billed.  P4 (19): LCP 14 with P2 ->
    # 12 (stored by P2); writes r(19) - 12 = 6.
    pytest.param(PricingProfile("min", 0.45, 0.09, 2.25, 0.45, min_prefix=6, increment=3),  # lengths 6, 9, 12, ...
                 None, [(7, 0, 7, 0, 6), (14, 6, 8, 0, 6), (11, 0, 2, 9, 9), (19, 12, 7, 0, 6)],
                 id="min prefix and increments"),
    # t = 0, 5, 30, 36. At 30 everything (last used at 5) has expired: P3 hits nothing and
    # re-bills S U X (9). At 36 P2's prefixes (last used 5) are gone; P3's (30) are live:
    # P4 hits only S U (5) and re-bills 12 - 5 = 7.
    pytest.param(PricingProfile("ttl", 0.45, 0.09, 2.25, 0.45, ttl_s=10),
                 [0, 5, 30, 36], [(7, 0, 7, 0, 7), (14, 7, 7, 0, 7), (11, 0, 2, 9, 11), (19, 5, 7, 7, 14)],
                 id="ttl expiry from timestamps"),
    # P1 stores 7 prefixes. P2 stores 14 (P1's 7 refreshed): over 12, evict the two longest
    # (same last use) -> P2 kept up to 12. P3 = S U X G hits S U (5), stores 6 more; over by 6:
    # the least recently used are P2's prefixes 7..12 (longest first), evicted, P2 kept up to 6.
    # P4 = S U A1 O1 A2 O2 G: the longest live prefix is 6 (S U + A1's first token).
    pytest.param(PricingProfile("lru", 0.45, 0.09, 2.25, 0.45, capacity_tokens=12),
                 None, [(7, 0, 7, 0, 7), (14, 7, 7, 0, 7), (11, 5, 2, 4, 6), (19, 6, 7, 6, 13)],
                 id="lru capacity"),
])
def test_a_cache_rule_on_a_prompt_matching_an_older_one(rule, times, expected):
    assert rows(run_of(OLDER, times=times), rule) == expected


def test_ttl_is_refreshed_by_every_use():
    ttl = PricingProfile("ttl", 0.45, 0.09, 2.25, 0.45, ttl_s=10)
    # P2 = S U X G at t=8 uses (refreshes) only the prefix S U of P1; at t=15 P1's longer
    # prefixes (last used at 0) have expired, S U (last used at 8) has not: hit 5, not 0 or 7.
    # B = |S U A1| = 8 (P2 sent 3 positions): 3 re-billed, 6 new; 14 - 5 written.
    prompts = [[S, U], [S, U, X], [S, U, A1, O1]]
    assert rows(run_of(prompts, times=[0, 8, 15]), ttl)[2] == (14, 5, 6, 3, 9)


def test_ttl_needs_timestamps():
    from forgetting.foundation.errors import RunOutputError

    ttl = PricingProfile("ttl", 0.45, 0.09, 2.25, 0.45, ttl_s=10)
    with pytest.raises(RunOutputError, match=r"'ttl'.*timestamps"):
        rows(run_of(APPEND_ONLY), ttl)


def test_profiles_are_computed_side_by_side_and_primary_chooses_the_tables():
    blocks = PricingProfile("blocks", 0.45, 0.09, 2.25, 0.45, increment=4, recompute_last_token=True)
    result = cost_prompts(run_of(APPEND_ONLY), [PAPER, blocks], primary="blocks")
    assert result.run_costs.column("profile").to_pylist() == ["paper", "blocks"]
    assert result.run_costs.column("cached_tokens").to_pylist() == [21, 16]
    assert result.calls.column("cached_tokens").to_pylist() == [0, 4, 12]
    assert result.calls.column("prefix_tokens").to_pylist() == [0, 7, 14]  # profile-free
    assert result.summary["cached_tokens"] == 16
    with pytest.raises(Exception, match="primary pricing profile 'nope'"):
        cost_prompts(run_of(APPEND_ONLY), [PAPER], primary="nope")
