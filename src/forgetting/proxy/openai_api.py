"""The slice of the OpenAI Chat Completions API the proxy speaks: request checks, error
bodies, the response summary the call log keeps, and server-sent events for ``stream``.

Streaming: a request with ``"stream": true`` is sent upstream *without* streaming; when the
whole reply is in, it is logged and returned to the client as a server-sent event stream
(one chunk with the whole message, one with the finish reason, one with usage when
``stream_options.include_usage`` asked for it, then ``[DONE]``). Clients that stream work
unchanged; they get the text at once instead of token by token.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import orjson


def loads(data: bytes) -> Any:
    """JSON → Python, with orjson (several times faster on a long history); what orjson
    rejects but the standard library accepts (NaN, huge integers) still parses."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def dumps(obj: Any) -> bytes:
    try:
        return orjson.dumps(obj)
    except TypeError:  # e.g. an integer beyond 64 bits
        return json.dumps(obj).encode()


class BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def error_body(message: str, status: int, kind: str = "invalid_request_error", code: Any = None) -> bytes:
    """An OpenAI-style error object."""
    error = {"message": message, "type": kind, "param": None, "code": code or status}
    return json.dumps({"error": error}).encode()


def upstream_error_body(status: int, body: bytes, fallback: str) -> bytes:
    """The upstream's error, as an OpenAI-style error: passed through when it already is one."""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("error"), dict | str):
        return body
    text = body.decode("utf-8", errors="replace").strip()[:2000]
    message = f"{fallback}: {text}" if text else fallback
    return error_body(message, status, "upstream_error")


def parse_request(body: bytes) -> dict[str, Any]:
    """A chat-completions request body → its JSON object; BadRequest naming what is wrong."""
    try:
        req = loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(400, f"request body is not valid JSON: {exc}") from None
    if not isinstance(req, dict):
        raise BadRequest(400, "request body must be a JSON object")
    messages = req.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest(400, "'messages' must be a non-empty list of message objects")
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise BadRequest(400, f"messages[{i}] must be an object")
        if not isinstance(m.get("role"), str):
            raise BadRequest(400, f"messages[{i}].role must be a string")
        content = m.get("content")
        if content is not None and not isinstance(content, str | list):
            raise BadRequest(400, f"messages[{i}].content must be a string, a list of parts or null")
        if "tool_calls" in m and m["tool_calls"] is not None and not isinstance(m["tool_calls"], list):
            raise BadRequest(400, f"messages[{i}].tool_calls must be a list")
    if "tools" in req and req["tools"] is not None and not isinstance(req["tools"], list):
        raise BadRequest(400, "'tools' must be a list")
    if "stream" in req and not isinstance(req["stream"], bool | type(None)):
        raise BadRequest(400, "'stream' must be true or false")
    return req


def summarize_response(data: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(what the call log keeps of a reply — first choice's content, reasoning, tool calls,
    finish reason —, the upstream usage)."""
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise ValueError("the reply has no choices")
    choice = choices[0]
    message = choice.get("message") or {}
    response = {
        "content": message.get("content"),
        "reasoning_content": message.get("reasoning_content"),
        "tool_calls": message.get("tool_calls") or None,
        "finish_reason": choice.get("finish_reason"),
    }
    usage = data.get("usage")
    return response, dict(usage) if isinstance(usage, Mapping) else None


def sse_stream(data: Mapping[str, Any], include_usage: bool) -> bytes:
    """A complete chat completion as the server-sent events of a streamed one."""
    base = {
        "id": data.get("id", "chatcmpl-proxy"),
        "object": "chat.completion.chunk",
        "created": data.get("created", 0),
        "model": data.get("model", ""),
    }
    deltas, finals = [], []
    for choice in data.get("choices") or []:
        message = choice.get("message") or {}
        delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
        if message.get("reasoning_content") is not None:
            delta["reasoning_content"] = message["reasoning_content"]
        if message.get("tool_calls"):
            delta["tool_calls"] = [{"index": k, **call} for k, call in enumerate(message["tool_calls"])]
        index = choice.get("index", 0)
        deltas.append({"index": index, "delta": delta, "finish_reason": None})
        finals.append({"index": index, "delta": {}, "finish_reason": choice.get("finish_reason")})
    events = [{**base, "choices": deltas}, {**base, "choices": finals}]
    if include_usage and data.get("usage") is not None:
        events.append({**base, "choices": [], "usage": data["usage"]})
    out = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
    return out + b"data: [DONE]\n\n"
