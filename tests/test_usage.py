"""The server's usage report, parsed once: each common API's fields, and malformed reports."""

from __future__ import annotations

import json

import pytest

from forgetting.foundation.errors import RunOutputError
from forgetting.prompt.usage import NO_USAGE, Usage, parse_usage
from forgetting.records.calllog import read_call_log

WHERE = "calls.jsonl: line 7 (call 3)"

#: one usage object per API style, as each server sends it, and what it says
STYLES = {
    "openai": (
        {"prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
         "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
         "completion_tokens_details": {"reasoning_tokens": 0}},
        Usage(2006, 300, 1920, None, "prompt_tokens_details.cached_tokens"),
    ),
    "vllm without --enable-prompt-tokens-details": (
        {"prompt_tokens": 1324, "completion_tokens": 56, "total_tokens": 1380, "prompt_tokens_details": None},
        Usage(1324, 56, None, None, None),
    ),
    "deepseek": (
        {"prompt_tokens": 1500, "completion_tokens": 20, "total_tokens": 1520,
         "prompt_cache_hit_tokens": 1280, "prompt_cache_miss_tokens": 220},
        Usage(1500, 20, 1280, None, "prompt_cache_hit_tokens"),
    ),
    "anthropic through LiteLLM": (
        {"prompt_tokens": 3000, "completion_tokens": 40, "total_tokens": 3040,
         "cache_read_input_tokens": 2048, "cache_creation_input_tokens": 512,
         "prompt_tokens_details": {"cached_tokens": 2048, "cache_creation_tokens": 512, "text_tokens": 440}},
        Usage(3000, 40, 2048, 512, "prompt_tokens_details.cached_tokens"),
    ),
    "openrouter": (
        {"prompt_tokens": 194, "completion_tokens": 2, "total_tokens": 196, "cost": 0.95,
         "prompt_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 100, "audio_tokens": 0}},
        Usage(194, 2, 0, 100, "prompt_tokens_details.cached_tokens"),
    ),
    "anthropic's own usage passed on": (
        {"input_tokens": 50, "output_tokens": 7, "cache_read_input_tokens": 2000, "cache_creation_input_tokens": 300},
        Usage(2350, 7, 2000, 300, "cache_read_input_tokens"),
    ),
    "no cache fields": ({"prompt_tokens": 10, "completion_tokens": 1}, Usage(10, 1, None, None, None)),
}


@pytest.mark.parametrize("style", STYLES)
def test_each_api_style_becomes_the_typed_record_and_keeps_the_raw_object(style):
    raw, expected = STYLES[style]
    usage = parse_usage(raw, WHERE)
    assert (usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens, usage.cache_write_tokens,
            usage.cached_field) == (expected.prompt_tokens, expected.completion_tokens, expected.cached_tokens,
                                    expected.cache_write_tokens, expected.cached_field)
    assert usage.raw == raw and usage.reports_cache == (expected.cached_tokens is not None)


def test_a_response_without_usage_reports_nothing():
    assert parse_usage(None, WHERE) == NO_USAGE and not NO_USAGE.reports_cache and NO_USAGE.prompt_tokens is None


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([1, 2], "usage is list, not an object"),
        ({"prompt_tokens": "2006"}, "usage.prompt_tokens is '2006', not a token count"),
        ({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": -1}},
         r"usage.prompt_tokens_details.cached_tokens is -1, not a token count"),
        ({"prompt_tokens": 10, "completion_tokens": True}, "usage.completion_tokens is True, not a token count"),
        ({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 2.5}}, "is 2.5, not a token count"),
        ({"prompt_tokens": 10, "prompt_tokens_details": [0]}, "usage.prompt_tokens_details is \\[0\\], not an object"),
        ({"prompt_tokens": 3000, "cache_read_input_tokens": 2048, "prompt_tokens_details": {"cached_tokens": 1024}},
         "the same tokens twice with different counts: prompt_tokens_details.cached_tokens = 1024, "
         "cache_read_input_tokens = 2048"),
        ({"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": 128}},
         "reports 128 cached tokens of a prompt of 100"),
        ({"prompt_tokens": 100, "cache_creation_input_tokens": 101},
         "reports 101 cache-write tokens of a prompt of 100"),
        ({"prompt_tokens": 1500, "prompt_cache_hit_tokens": 1280, "prompt_cache_miss_tokens": 200},
         "prompt_cache_hit_tokens \\+ prompt_cache_miss_tokens = 1480, but prompt_tokens = 1500"),
        ({"completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 32}},
         "reports cached or written tokens but no prompt_tokens"),
    ],
)
def test_malformed_usage_is_one_line_naming_the_call(raw, message):
    with pytest.raises(RunOutputError, match=message) as info:
        parse_usage(raw, WHERE)
    text = str(info.value)
    assert text.startswith(WHERE + ": ") and "\n" not in text


def _log(path, usage) -> None:
    records = [
        {"type": "header", "format": "forgetting-calllog/1", "run_id": "r"},
        {"type": "segment", "key": "k", "message": {"role": "user", "content": "hi"}, "n_tokens": 2,
         "token_ids": [1, 2]},
        {"type": "call", "index": 1, "ok": True, "t_request": 0.0, "t_response": 1.0, "segments": ["k"],
         "params": {}, "deleted": [], "response": {"content": "x"}, "usage": usage, "status": 200, "error": None},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_the_call_log_reader_parses_usage_once_and_names_the_call_of_a_bad_one(tmp_path):
    log = tmp_path / "calls.jsonl"
    raw = STYLES["deepseek"][0]
    _log(log, raw)
    call = read_call_log(log).calls[0]
    assert call.usage.cached_tokens == 1280 and call.usage.prompt_tokens == 1500 and call.usage.raw == raw
    assert read_call_log(log).output_tokens(call) == 20  # the server's completion count
    _log(log, {"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": "all"}})
    with pytest.raises(RunOutputError, match=r"calls.jsonl: line 3 \(call 1\): usage.prompt_tokens_details"):
        read_call_log(log)
