"""The server's own counts beside the reconstruction: the prompt check and the reported view.

Call logs through the real writer whose usage a provider with a known cache rule reported
(1,024-token minimum, 128-token steps: ``forgetting_testkit.provider_cache``), in each API's
field names."""

from __future__ import annotations

import json

import pytest

from forgetting.cost import cost_run, load_profiles, load_run
from forgetting.cost.result import PER_MILLION
from forgetting_testkit import provider_cache
from forgetting_testkit.naive_cost import naive_prefixes

PROFILES = ["paper", "min-prefix", "vllm-blocks", "write-premium-ttl"]


@pytest.fixture(scope="module")
def profiles():
    return {p.name: p for p in load_profiles(None, PROFILES)}


@pytest.mark.parametrize("style", provider_cache.STYLES)
def test_the_reported_view_prices_each_call_from_the_servers_counts(tmp_path, profiles, style):
    log = tmp_path / "calls.jsonl"
    prompts = provider_cache.write_provider_log(log, "mini/baseline/t/1", style=style, turns=6)
    result = cost_run(log, list(profiles.values()))
    cached = [provider_cache.cached_tokens(p, prompts[:i]) for i, p in enumerate(prompts)]
    written = [provider_cache.written_tokens(p, c) for p, c in zip(prompts, cached, strict=True)]
    assert cached[:2] == [0, 0] and all(c >= 1024 for c in cached[2:])  # the rule's 1,024-token minimum
    for name, profile in profiles.items():
        calls = result.calls_by_profile[name].to_pylist()
        assert [c["reported_cached_tokens"] for c in calls] == cached
        assert [c["reported_prompt_tokens"] for c in calls] == [len(p) for p in prompts]
        writes = written if style == "anthropic-gateway" else [None] * len(prompts)
        assert [c["reported_cache_write_tokens"] for c in calls] == writes
        for c, n, hit, w in zip(calls, prompts, cached, writes, strict=True):
            price = (hit * profile.cached_input + (len(n) - hit) * profile.input
                     + (w or 0) * (profile.cache_write - profile.input) + c["output_tokens"] * profile.output)
            assert c["cost_reported"] == pytest.approx(price / PER_MILLION, rel=1e-12)
        row = result.profile_row(name)
        assert row["cost_reported"] == pytest.approx(sum(c["cost_reported"] for c in calls), rel=1e-12)
        assert row["reported_prompt_tokens"] == row["reconstructed_prompt_tokens"] == sum(map(len, prompts))
        assert row["reported_cache_write_tokens"] == (sum(written) if style == "anthropic-gateway" else None)
    # the min-prefix profile is the provider's rule: the reconstruction bills exactly what it reported
    exact = result.profile_row("min-prefix")
    assert exact["reconstructed_cached_tokens"] == exact["reported_cached_tokens"] == sum(cached)
    if style != "anthropic-gateway":  # (the profile has no write premium; the gateway's writes cost none)
        assert exact["cost_cache_on_reported"] == pytest.approx(exact["cost_reported"], rel=1e-12)
    # the paper's lower bound caches every prefix at token level: more than the provider by a known amount
    run = result.profile_row("paper")
    lcp = [n for _, n, _ in naive_prefixes(load_run(log))]
    assert run["reconstructed_cached_tokens"] == sum(lcp) > sum(cached)
    assert run["cost_cache_on_reported"] < run["cost_reported"]


def test_a_write_premium_in_the_reported_view_comes_from_the_reported_writes(tmp_path, profiles):
    log = tmp_path / "calls.jsonl"
    prompts = provider_cache.write_provider_log(log, "r", style="anthropic-gateway", turns=4)
    ttl = profiles["write-premium-ttl"]
    calls = cost_run(log, [ttl]).calls.to_pylist()
    cached = [provider_cache.cached_tokens(p, prompts[:i]) for i, p in enumerate(prompts)]
    for c, p, hit in zip(calls, prompts, cached, strict=True):
        w = provider_cache.written_tokens(p, hit)
        without = (hit * ttl.cached_input + (len(p) - hit) * ttl.input + c["output_tokens"] * ttl.output) / PER_MILLION
        assert c["cost_reported"] == pytest.approx(without + w * (ttl.cache_write - ttl.input) / PER_MILLION)
        assert (w > 0) == (len(p) >= 1024)  # the provider writes what it can cache and did not hold


def test_the_prompt_check_flags_calls_beyond_the_tolerance_and_counts_them_per_run(tmp_path):
    log = tmp_path / "calls.jsonl"
    # call 1 agrees; call 2 is 0.2 % off (within 1 %); call 3 is 4 tokens short of 1,994 (0.2 %);
    # call 4 counts 100 more of 2,821 (3.5 %, beyond); call 5 is exactly 1 % of 3,648 rounded down
    offsets = [0, 2, -4, 100, 36]
    prompts = provider_cache.write_provider_log(log, "r", turns=5, prompt_offsets=offsets)
    assert [len(p) for p in prompts] == [340, 1167, 1994, 2821, 3648]
    paper = load_profiles(None, ["paper"])
    result = cost_run(log, paper)
    calls = result.calls.to_pylist()
    assert [c["reported_prompt_tokens"] for c in calls] == [len(p) + o for p, o in zip(prompts, offsets, strict=True)]
    assert [c["prompt_tokens"] for c in calls] == [len(p) for p in prompts]  # the cost uses the rebuilt prompts
    assert [c["prompt_mismatch"] for c in calls] == [False, False, False, True, False]
    assert (result.summary["prompt_checked_calls"], result.summary["prompt_mismatch_calls"]) == (5, 1)
    strict = cost_run(log, paper, prompt_tolerance=0.0)
    assert [c["prompt_mismatch"] for c in strict.calls.to_pylist()] == [False, True, True, True, True]
    assert strict.summary["prompt_mismatch_calls"] == 4
    loose = cost_run(log, paper, prompt_tolerance=0.05)
    assert loose.summary["prompt_mismatch_calls"] == 0


def test_calls_without_usage_are_not_checked_and_have_no_reported_view(tmp_path):
    log = tmp_path / "calls.jsonl"
    provider_cache.write_provider_log(log, "r", turns=2)
    text = log.read_text().splitlines()
    first_call = next(i for i, line in enumerate(text) if '"type":"call"' in line)
    record = json.loads(text[first_call])
    record["usage"] = None
    text[first_call] = json.dumps(record)
    log.write_text("\n".join(text) + "\n")
    result = cost_run(log, load_profiles(None, ["paper"]))
    calls = result.calls.to_pylist()
    assert [c["prompt_mismatch"] for c in calls] == [None, False]
    assert [c["cost_reported"] is None for c in calls] == [True, False]
    assert (result.summary["prompt_checked_calls"], result.summary["prompt_mismatch_calls"]) == (1, 0)
    row = result.profile_row("paper")
    assert row["reported_calls"] == 1 and row["reported_prompt_tokens"] == calls[1]["prompt_tokens"]
