"""The fields of a call log's records (``calls.jsonl``, :mod:`forgetting.records.calllog`), checked.

A record that is valid JSON but misses a field a reader uses, or holds it with another type,
is one :class:`~forgetting.foundation.errors.RunOutputError` line naming the file, the line and the field
(``calls.jsonl: line 7 (call): segments[2] is the number 5, expected a segment key``). The
reader then builds its typed records from what these functions return and trusts them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forgetting.records.fields import Fields, is_int
from forgetting.records.mini import check_chat_message

_HINT = "the call log is corrupt; rerun the run"


def _fields(rec: Mapping[str, Any], source: Path, line: int, kind: str) -> Fields:
    return Fields(rec, Path(f"{source}: line {line} ({kind})"), "", _HINT)


def check_header(rec: Mapping[str, Any], source: Path, line: int) -> None:
    """The header's fields a reader uses: the run id, how the prompts were counted (the
    generation prompt's ids), the server's prefix-cache block."""
    f = _fields(rec, source, line, "header")
    f.string("run_id")
    count = f.obj("prompt_count")
    if count is not None:
        method = count.string("method", required=True, null=False)
        if method not in ("served", "approximation"):
            raise count.error("method", method, "served or approximation")
        ids = count.items("generation_prompt_ids")
        if ids is not None and not all(type(t) is int and t >= 0 for t in ids):
            raise count.error("generation_prompt_ids[…]", ids, "token ids (integers ≥ 0)")
    server = f.obj("server")
    if server is not None:
        size = server.data.get("kv_block_size")
        if size is not None and not (type(size) is int and size >= 1):
            raise server.error("kv_block_size", size, "a block size in tokens (an integer ≥ 1)")


def check_segment(rec: Mapping[str, Any], source: Path, line: int) -> tuple[str, dict[str, Any], list[int]]:
    """(key, message, token ids) of a segment record."""
    f = _fields(rec, source, line, "segment")
    key = f.string("key", required=True, null=False)
    message = f.obj("message", required=True, null=False)
    assert key is not None and message is not None
    message.string("role", required=True, null=False)
    check_chat_message(message)
    ids = f.items("token_ids", required=True, null=False)
    assert ids is not None
    if not all(type(t) is int and t >= 0 for t in ids):
        bad = next(t for t in ids if not (type(t) is int and t >= 0))
        raise f.error("token_ids[…]", bad, "a token id (an integer ≥ 0)")
    return key, dict(message.data), ids


@dataclass(frozen=True)
class CallFields:
    """The checked fields of a successful call record."""

    index: int
    t_request: float
    t_response: float
    segments: list[str]
    params: dict[str, Any]
    deleted: list[Any]  # the raw entries: PartDeletion.from_json parses each
    response: dict[str, Any]
    usage: dict[str, Any] | None
    attempts: int


def check_call(rec: Mapping[str, Any], source: Path, line: int) -> CallFields:
    """The fields of a successful (``ok``) call record."""
    f = _fields(rec, source, line, "call")
    index = f.integer("index", required=True, null=False)
    t_request = f.number("t_request", required=True, null=False)
    t_response = f.number("t_response", required=True, null=False)
    segments = f.items("segments", required=True, null=False)
    assert index is not None and t_request is not None and t_response is not None and segments is not None
    for i, key in enumerate(segments):
        if not isinstance(key, str):
            raise f.error(f"segments[{i}]", key, "a segment key (a string)")
    params = f.mapping("params") or {}
    deleted = f.items("deleted", required=True, null=False)
    response = f.obj("response")
    if response is not None:
        check_chat_message(response)
        response.string("finish_reason")
    usage = f.mapping("usage")
    attempts = rec.get("attempts", 1)
    if not is_int(attempts):
        raise f.error("attempts", attempts, "an integer")
    return CallFields(
        index=index,
        t_request=float(t_request),
        t_response=float(t_response),
        segments=list(segments),
        params=dict(params),
        deleted=list(deleted or []),
        response=dict(response.data) if response is not None else {},
        usage=dict(usage) if usage is not None else None,
        attempts=attempts,
    )
