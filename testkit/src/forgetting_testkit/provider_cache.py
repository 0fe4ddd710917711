"""The prompt-cache rule of a hosted provider, as a pure function, and its usage reports in each
API style — what a known-gap test expects a provider to bill (not a cache anyone runs).

The rule (OpenAI's published one; the named fake provider of the endpoint tests applies the same):
a prompt of ``n`` tokens is served from the cache up to the longest prefix it shares with any
earlier prompt of the run (token level, no expiry, no eviction), rounded down to the lattice
``min_prefix, min_prefix + block, min_prefix + 2·block, …`` (0 below ``min_prefix``): with the
defaults nothing under 1,024 tokens is cached and hits grow in 128-token steps. A whole earlier
prompt counts too (no token of it is recomputed), so a prompt that repeats an earlier one of
1,200 tokens gets 1,152. This is exactly the ``min-prefix`` pricing profile
(``resources/pricing/min-prefix.yaml``: ``min_prefix: 1024``, ``increment: 128``).

:func:`usage` writes a call's ``usage`` object the way each API reports it (``openai``,
``deepseek``, ``anthropic-gateway`` — LiteLLM's Chat Completions shape for an Anthropic model,
whose ``prompt_tokens`` counts the cached and written tokens too).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from forgetting.prompt import chat_format, tokenizer
from forgetting.records import PartDeletion
from forgetting.records.calllog import CallLogWriter
from forgetting.records.mini import MINI_BASH_TOOL

MIN_PREFIX = 1024
BLOCK = 128
STYLES = ("openai", "deepseek", "anthropic-gateway")


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def rounded(tokens: int, min_prefix: int = MIN_PREFIX, block: int = BLOCK) -> int:
    """The longest cacheable length ≤ ``tokens``."""
    if tokens < min_prefix:
        return 0
    return min_prefix + (tokens - min_prefix) // block * block


def cached_tokens(
    prompt: Sequence[int], earlier: Sequence[Sequence[int]], *, min_prefix: int = MIN_PREFIX, block: int = BLOCK
) -> int:
    """The prompt tokens the provider serves from its cache, given the run's earlier prompts."""
    best = max((common_prefix(prompt, e) for e in earlier), default=0)
    return rounded(best, min_prefix, block)


def written_tokens(prompt: Sequence[int], cached: int, *, min_prefix: int = MIN_PREFIX, block: int = BLOCK) -> int:
    """The tokens the provider writes to its cache for a prompt it served ``cached`` of."""
    return rounded(len(prompt), min_prefix, block) - cached


def usage(style: str, prompt_tokens: int, completion_tokens: int, cached: int, written: int = 0) -> dict[str, Any]:
    """A call's ``usage`` object in ``style``'s field names."""
    base = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if style == "openai":
        return {**base, "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0}}
    if style == "deepseek":
        return {**base, "prompt_cache_hit_tokens": cached, "prompt_cache_miss_tokens": prompt_tokens - cached}
    if style == "anthropic-gateway":
        return {
            **base,
            "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": written,
            "prompt_tokens_details": {"cached_tokens": cached, "cache_creation_tokens": written},
        }
    raise ValueError(f"unknown usage style {style!r}; expected one of {', '.join(STYLES)}")


def write_provider_log(
    path: Any,
    run_id: str,
    *,
    style: str = "openai",
    turns: int = 6,
    prompt_offsets: Sequence[int] = (),
    rewrite_at: int | None = None,
    seed: int = 0,
) -> list[list[int]]:
    """A run's call log through the real writer (mini-swe-agent's ``bash`` tool, a tool output
    of ~300 tokens per turn), whose usage a provider with this module's rule reported in
    ``style``; returns the prompts' token ids. ``prompt_offsets[i]`` is added to call ``i + 1``'s
    reported ``prompt_tokens`` (a server that counts differently); from call ``rewrite_at`` on,
    turn 1's tool output is replaced by a placeholder (a deletion: the prefix breaks there)."""
    tools = [MINI_BASH_TOOL]
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful software engineer working in a repository."},
        {"role": "user", "content": f"Fix the failing test of module m{seed}. " * 20},
    ]
    prompts: list[list[int]] = []
    with CallLogWriter(Path(path), {"run_id": run_id}) as writer:
        for i in range(1, turns + 1):
            sent = [dict(m) for m in history]
            deleted = []
            if rewrite_at is not None and i >= rewrite_at and len(sent) > 3:
                before = tokenizer.count(sent[3]["content"])
                sent[3] = {**sent[3], "content": "[tool output deleted]"}
                if i == rewrite_at:
                    after = tokenizer.count(sent[3]["content"])
                    deleted = [PartDeletion(1, "tool_output", 3, "turn", before, after, before)]
            ids = chat_format.prompt_token_ids(sent, tools)
            cached = cached_tokens(ids, prompts)
            written = written_tokens(ids, cached)
            prompts.append(ids)
            command = f"sed -n 1,60p src/m{seed}/file{i}.py"
            reply = {
                "role": "assistant",
                "content": f"Reading file {i}.",
                "tool_calls": [{"id": f"c{i}", "type": "function",
                                "function": {"name": "bash", "arguments": '{"command": "' + command + '"}'}}],
            }
            completion = len(chat_format.completion_token_ids(reply))
            offset = prompt_offsets[i - 1] if i - 1 < len(prompt_offsets) else 0
            writer.append_call(
                messages=sent,
                tools=tools,
                params={"temperature": 0},
                deleted=deleted,
                response={**{k: reply[k] for k in ("content", "tool_calls")}, "finish_reason": "tool_calls"},
                usage=usage(style, len(ids) + offset, completion, cached, written),
                t_request=1000.0 + 10 * i,
                t_response=1001.0 + 10 * i,
            )
            output = "\n".join(f"{n}: value_{seed}_{i}_{n} = compute({n}, {i})" for n in range(1, 41))
            history += [reply, {"role": "tool", "tool_call_id": f"c{i}", "content": output}]
    return prompts
