"""The named fake provider (a test double for a hosted provider): its prompt-cache rule as a
pure function and incrementally, its usage styles, its key, and its misbehaviour."""

from __future__ import annotations

import json
import random
import urllib.error
import urllib.request

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forgetting.demo.scripted import ScriptedModelServer
from forgetting.demo.scripted.settings import ScriptedSettings
from forgetting.prompt import chat_format
from forgetting_testkit.fakes.provider import (
    BLOCK,
    MIN_PREFIX,
    FakeProvider,
    ProviderPrefixCache,
    Rule,
    aligned,
    http_date,
    provider_cached_series,
    provider_cached_tokens,
    usage_in_style,
)
from forgetting_testkit.runner import TASKS

KEY = "sk-test-provider-41c2"


def test_the_cacheable_length_is_whole_blocks_past_the_minimum():
    assert (MIN_PREFIX, BLOCK) == (1024, 128)
    assert [aligned(n) for n in (0, 1023, 1024, 1151, 1152, 1300, 5000)] == [0, 0, 1024, 1024, 1152, 1280, 4992]


def test_the_cache_rule_on_hand_built_prompts():
    base = list(range(3000))
    assert provider_cached_tokens(base, []) == 0  # the first prompt of a cache
    assert provider_cached_tokens(base, [base]) == 2944  # the same prompt: to its last whole block
    assert provider_cached_tokens([*base[:1000], 7], [base]) == 0  # under the minimum, never a hit
    edited = [*base[:1500], -1, *base[1501:]]  # an edit at token 1500 (a deletion in the history)
    assert provider_cached_tokens(edited, [base]) == 1408  # the block before it
    assert provider_cached_tokens([*base, 1, 2, 3], [base[:2000], edited]) == 1920
    assert provider_cached_series([base[:1100], base[:1200], base]) == [0, 1024, 1152]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2600)), min_size=1, max_size=6), st.integers(0, 2**32))
def test_the_incremental_cache_computes_the_pure_rule(plan, seed):
    rng = random.Random(seed)
    trunk = [rng.randrange(50) for _ in range(2600)]
    prompts = []
    for mutate_at, length in plan:  # prompts sharing prefixes of various lengths
        p = trunk[:length]
        if mutate_at and p:
            i = rng.randrange(len(p))
            p = [*p[:i], 99, *p[i + 1:]]
        prompts.append(p)
    cache = ProviderPrefixCache()
    got = [cache.lookup_and_store(p) for p in prompts]
    assert [c for c, _ in got] == provider_cached_series(prompts)
    assert [w for _, w in got] == [aligned(len(p)) - c for p, (c, _) in zip(prompts, got, strict=True)]


def test_usage_styles():
    assert usage_in_style("openai", 2000, 30, 1152, 768) == {
        "prompt_tokens": 2000, "completion_tokens": 30, "total_tokens": 2030,
        "prompt_tokens_details": {"cached_tokens": 1152}}
    assert usage_in_style("deepseek", 2000, 30, 1152, 768) == {
        "prompt_tokens": 2000, "completion_tokens": 30, "total_tokens": 2030,
        "prompt_cache_hit_tokens": 1152, "prompt_cache_miss_tokens": 848}
    assert usage_in_style("anthropic", 2000, 30, 1152, 768) == {
        "prompt_tokens": 2000, "completion_tokens": 30, "total_tokens": 2030,
        "cache_read_input_tokens": 1152, "cache_creation_input_tokens": 768}
    with pytest.raises(ValueError, match="unknown usage style"):
        usage_in_style("bedrock", 1, 1, 0, 0)


def _call(url: str, body: dict | None = None, *, key: str | None = KEY, run: str | None = None) -> tuple[int, dict]:
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    if run is not None:
        headers["X-Forgetting-Run"] = run
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url + ("/chat/completions" if body is not None else "/models"), data=data,
                                 headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _task_messages(n_turns: int) -> list[dict]:
    """A long enough history (the demo task's statement, padded) that the cache rule bites."""
    from forgetting.demo.tasks import load_instance

    task = load_instance(TASKS, "demo__confkit-1")["problem_statement"]
    messages = [{"role": "system", "content": "You are a careful software engineer. " * 130},
                {"role": "user", "content": task}]
    for i in range(n_turns):
        messages += [{"role": "assistant", "content": f"THOUGHT: step {i}\n\n```mswea_bash_command\nls\n```"},
                     {"role": "user", "content": f"<output>\n{'file.py ' * 120}\n</output>"}]
    return messages


@pytest.fixture(scope="module")
def stand_in():
    with ScriptedModelServer(TASKS, settings=ScriptedSettings.from_mapping()).start() as server:
        yield server


@pytest.mark.parametrize("style", ["openai", "deepseek", "anthropic"])
def test_the_provider_reports_its_own_cache_per_key_and_run(stand_in, style):
    with FakeProvider(stand_in.url, key=KEY, style=style) as provider:
        status, models = _call(provider.url)
        assert status == 200 and [m["id"] for m in models["data"]] == ["scripted"]
        prompts, usages = [], []
        for turns in (0, 1, 2):
            body = {"model": "scripted", "messages": _task_messages(turns)}
            status, reply = _call(provider.url, body, run="r1")
            assert status == 200 and reply["choices"][0]["message"]
            prompts.append(chat_format.prompt_token_ids(body["messages"]))
            usages.append(reply["usage"])
        expected = provider_cached_series(prompts)
        assert expected[0] == 0 and expected[2] > expected[1] > 0  # the rule bites at these lengths
        for usage, cached, prompt in zip(usages, expected, prompts, strict=True):
            assert usage["prompt_tokens"] == len(prompt)
            if style == "openai":
                assert usage["prompt_tokens_details"] == {"cached_tokens": cached}
            elif style == "deepseek":
                assert (usage["prompt_cache_hit_tokens"], usage["prompt_cache_miss_tokens"]) == (
                    cached, len(prompt) - cached)
            else:
                assert usage["cache_read_input_tokens"] == cached and "prompt_tokens_details" not in usage
                assert usage["cache_creation_input_tokens"] == aligned(len(prompt)) - cached
        # another run meets an empty cache; the same run again hits its own
        for run, cached in (("r2", 0), ("r1", aligned(len(prompts[2])))):
            _, reply = _call(provider.url, {"model": "scripted", "messages": _task_messages(2)}, run=run)
            usage = reply["usage"]
            hits = {"openai": lambda u: u["prompt_tokens_details"]["cached_tokens"],
                    "deepseek": lambda u: u["prompt_cache_hit_tokens"],
                    "anthropic": lambda u: u["cache_read_input_tokens"]}[style]
            assert hits(usage) == cached


def test_the_provider_wants_its_key_and_repeats_a_wrong_one(stand_in):
    with FakeProvider(stand_in.url, key=KEY) as provider:
        status, body = _call(provider.url, key="sk-wrong-0000")
        assert status == 401 and "sk-wrong-0000" in body["error"]["message"]  # careless, as some are
        assert _call(provider.url, key=None)[0] == 401
        assert provider.auth_failures == 2


def test_misbehaviour_after_some_requests_for_some_times(stand_in):
    body = {"model": "scripted", "messages": _task_messages(0)}
    with FakeProvider(stand_in.url, key=KEY) as provider:
        provider.misbehave(Rule("status", status=429, after=1, times=2, retry_after=http_date(5), chat_only=True))
        assert [_call(provider.url, body)[0] for _ in range(4)] == [200, 429, 429, 200]
        assert _call(provider.url)[0] == 200  # chat only
        provider.behave()
        provider.misbehave(Rule("unknown_model"))
        status, models = _call(provider.url)
        assert status == 200 and [m["id"] for m in models["data"]] == ["other-model"]
        status, error = _call(provider.url, body)
        assert status == 404 and error["error"]["code"] == "model_not_found"
        provider.behave()
        provider.misbehave(Rule("unauthorized"))
        assert _call(provider.url)[0] == 401
