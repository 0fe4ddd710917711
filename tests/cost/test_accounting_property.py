"""Property tests: the radix-tree accounting equals the definitions taken literally."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from forgetting.cost.accounting import account, split
from forgetting.cost.pricing import PricingProfile
from forgetting.cost.prompts import BlockStore, CallPrompt, RunPrompts
from forgetting_testkit.naive_cost import naive_account

# tiny alphabet and short blocks: many blocks share heads, some are prefixes of others
block = st.lists(st.integers(1, 4), min_size=0, max_size=6)
op = st.one_of(
    st.tuples(st.just("append"), st.lists(st.integers(0, 9), min_size=1, max_size=3)),
    st.tuples(st.just("rewrite"), st.integers(0, 40), st.integers(0, 9)),
    st.tuples(st.just("truncate"), st.integers(0, 40)),
)
profile = st.builds(
    PricingProfile,
    name=st.just("p"),
    input=st.just(1.0),
    cached_input=st.just(0.1),
    output=st.just(2.0),
    cache_write=st.sampled_from([1.0, 1.25]),
    min_prefix=st.sampled_from([0, 0, 3, 5]),
    increment=st.sampled_from([1, 1, 2, 3, 4]),
    recompute_last_token=st.booleans(),
    ttl_s=st.sampled_from([None, None, 3.0, 7.0, 15.0]),
    capacity_tokens=st.sampled_from([None, None, 4, 9, 25]),
)


def build(variants: list[list[int]], ops: list[tuple], gaps: list[int]) -> RunPrompts:
    store = BlockStore()
    gen = store.intern([7, 8])
    run = RunPrompts("prop", Path("prop"), "calllog", store)
    history: list[list[int]] = []
    t = 0.0
    for i, o in enumerate(ops):
        if o[0] == "append":
            history = history + [variants[k % len(variants)] for k in o[1]]
        elif o[0] == "rewrite" and history:
            k = o[1] % len(history)
            history = [*history[:k], variants[o[2] % len(variants)], *history[k + 1 :]]
        elif o[0] == "truncate":
            history = history[: o[1] % (len(history) + 1)]
        t += gaps[i % len(gaps)]
        blocks = (*(store.intern(b) for b in history), gen)
        run.calls.append(CallPrompt(i + 1, blocks, len(history), 1, time=t))
    return run


@settings(max_examples=300, deadline=None)
@given(
    variants=st.lists(block, min_size=1, max_size=10),
    ops=st.lists(op, min_size=1, max_size=14),
    gaps=st.lists(st.integers(1, 6), min_size=1, max_size=4),
    profiles=st.lists(profile, min_size=1, max_size=3),
)
def test_fast_accounting_equals_naive_and_splits_add_up(variants, ops, gaps, profiles):
    run = build(variants, ops, gaps)
    fast = account(run, profiles)
    assert fast == naive_account(run, profiles)
    for a in fast:
        for step in a.steps:
            cached, new, rebilled = split(a.prompt_tokens, step.hit, a.boundary)
            assert cached + new + rebilled == a.prompt_tokens
            assert min(cached, new, rebilled, step.written) >= 0
            assert step.hit <= a.prefix_tokens


@settings(max_examples=150, deadline=None)
@given(
    variants=st.lists(block, min_size=1, max_size=10),
    appends=st.lists(st.lists(st.integers(0, 9), min_size=1, max_size=3), min_size=1, max_size=12),
)
def test_append_only_histories_rebill_nothing(variants, appends):
    run = build(variants, [("append", a) for a in appends], [1])
    paper = PricingProfile("paper", 0.45, 0.09, 2.25, 0.45)
    for a in account(run, [paper]):
        assert split(a.prompt_tokens, a.steps[0].hit, a.boundary)[2] == 0
