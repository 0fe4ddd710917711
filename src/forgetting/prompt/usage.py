"""A model server's ``usage`` report, parsed once into a typed record (:class:`Usage`).

The call log keeps each response's ``usage`` object exactly as the server sent it; the readers
(:func:`forgetting.records.calllog.read_call_log`, :mod:`forgetting.records.mini`) turn it into a
:class:`Usage` here, and inner code reads only that record. The field names of the common
APIs, all in one OpenAI-compatible ``usage`` object:

==========================================  =====================================================
field                                       who reports it
==========================================  =====================================================
``prompt_tokens``, ``completion_tokens``    every Chat Completions server (vLLM, SGLang, OpenAI,
                                            DeepSeek, gateways)
``prompt_tokens_details.cached_tokens``     OpenAI; vLLM with ``--enable-prompt-tokens-details``;
                                            gateways (LiteLLM, OpenRouter) for every provider
``prompt_cache_hit_tokens`` /               DeepSeek (hit + miss = ``prompt_tokens``)
``prompt_cache_miss_tokens``
``cache_read_input_tokens`` /               Anthropic, passed through by gateways (LiteLLM puts
``cache_creation_input_tokens``             them beside ``prompt_tokens``, which then counts them)
``prompt_tokens_details.cache_write_tokens``   OpenRouter's cache writes
``prompt_tokens_details.cache_creation_tokens`` LiteLLM's cache writes
``input_tokens``, ``output_tokens``         Anthropic's own usage (``input_tokens`` without the
                                            cached and written tokens), when a gateway passes it on
==========================================  =====================================================

*Cached* tokens are prompt tokens the provider served from its cache (billed at the cached
price); *cache-write* tokens are prompt tokens it wrote to the cache (billed with a premium by
providers that charge one). A count reported under two names must agree. ``prompt_tokens``
counts every prompt token, cached and written ones included (for Anthropic's own usage it is
``input_tokens`` + reads + writes). A field that is not a non-negative integer, cached or
written tokens beyond the prompt, or DeepSeek's hit + miss ≠ ``prompt_tokens`` is one
:class:`~forgetting.foundation.errors.RunOutputError` line naming the call (``where``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from forgetting.foundation.errors import RunOutputError

#: where each API reports cache reads, in the order they are looked up
READ_FIELDS: tuple[str, ...] = (
    "prompt_tokens_details.cached_tokens",
    "cache_read_input_tokens",
    "prompt_cache_hit_tokens",
)
#: where each API reports cache writes
WRITE_FIELDS: tuple[str, ...] = (
    "prompt_tokens_details.cache_write_tokens",
    "prompt_tokens_details.cache_creation_tokens",
    "cache_creation_input_tokens",
)


@dataclass(frozen=True)
class Usage:
    """What the server reported for one call; a count is None when it reported none."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None  # prompt tokens served from the provider's cache
    cache_write_tokens: int | None = None  # prompt tokens written to the provider's cache
    #: the field the cached tokens came from (one of :data:`READ_FIELDS`); None: not reported
    cached_field: str | None = None
    #: the ``usage`` object as reported (None: the response had none)
    raw: Mapping[str, Any] | None = None

    @property
    def reports_cache(self) -> bool:
        """Whether the server said how many prompt tokens its cache served (0 included)."""
        return self.cached_tokens is not None


#: a response without usage
NO_USAGE = Usage()


def _get(raw: Mapping[str, Any], name: str) -> Any:
    if "." not in name:
        return raw.get(name)
    outer, inner = name.split(".", 1)
    sub = raw.get(outer)
    return sub.get(inner) if isinstance(sub, Mapping) else None


def _count(raw: Mapping[str, Any], name: str, where: str) -> int | None:
    value = _get(raw, name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RunOutputError(f"{where}: usage.{name} is {value!r}, not a token count (an integer ≥ 0)")
    return value


def _one_of(raw: Mapping[str, Any], names: tuple[str, ...], where: str) -> tuple[int | None, str | None]:
    """The count reported under any of ``names`` (they must agree) and the first name it is under."""
    found = [(n, v) for n in names if (v := _count(raw, n, where)) is not None]
    if not found:
        return None, None
    first, value = found[0]
    for name, other in found[1:]:
        if other != value:
            raise RunOutputError(
                f"{where}: usage reports the same tokens twice with different counts: "
                f"{first} = {value}, {name} = {other}"
            )
    return value, first


def parse_usage(raw: Any, where: str) -> Usage:
    """The typed record of a response's ``usage`` (None: :data:`NO_USAGE`); ``where`` names
    the call in an error (``calls.jsonl: line 7 (call 3)``)."""
    if raw is None:
        return NO_USAGE
    if not isinstance(raw, Mapping):
        raise RunOutputError(f"{where}: usage is {type(raw).__name__}, not an object")
    details = raw.get("prompt_tokens_details")
    if details is not None and not isinstance(details, Mapping):
        raise RunOutputError(f"{where}: usage.prompt_tokens_details is {details!r}, not an object or null")
    cached, cached_field = _one_of(raw, READ_FIELDS, where)
    written, _ = _one_of(raw, WRITE_FIELDS, where)
    prompt = _count(raw, "prompt_tokens", where)
    if prompt is None:
        uncached = _count(raw, "input_tokens", where)  # Anthropic's own usage
        if uncached is not None:
            prompt = uncached + (cached or 0) + (written or 0)
    completion = _count(raw, "completion_tokens", where)
    if completion is None:
        completion = _count(raw, "output_tokens", where)
    if prompt is None and (cached is not None or written is not None):
        raise RunOutputError(f"{where}: usage reports cached or written tokens but no prompt_tokens")
    if prompt is not None:
        for name, value in (("cached", cached), ("cache-write", written)):
            if value is not None and value > prompt:
                raise RunOutputError(
                    f"{where}: usage reports {value} {name} tokens of a prompt of {prompt} (prompt_tokens "
                    "must count every prompt token, cached and written ones included)"
                )
        miss = _count(raw, "prompt_cache_miss_tokens", where)
        hit = _count(raw, "prompt_cache_hit_tokens", where)
        if miss is not None and hit is not None and hit + miss != prompt:
            raise RunOutputError(
                f"{where}: usage.prompt_cache_hit_tokens + prompt_cache_miss_tokens = {hit + miss}, "
                f"but prompt_tokens = {prompt}"
            )
    return Usage(prompt, completion, cached, written, cached_field, raw)
