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
from pathlib import Path
from typing import Any

import orjson

from forgetting.foundation.errors import RunOutputError
from forgetting.prompt.usage import parse_usage
from forgetting.records.fields import Fields
from forgetting.records.mini import check_chat_message

#: deepest nesting of a request or reply accepted (a chat request nests 6 levels deep; a
#: tool's JSON-schema parameters a few more)
MAX_DEPTH = 64


def parse_json(data: bytes) -> tuple[Any, bool]:
    """JSON → (Python, strict). orjson parses it (several times faster on a long history;
    ``strict``: then it holds no lone surrogate, NaN or integer beyond 64 bits); what orjson
    rejects but the standard library accepts still parses (``strict`` False). Not JSON, or
    nested beyond the stack: ``ValueError``."""
    try:
        return orjson.loads(data), True
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(data), False
    except RecursionError:
        raise ValueError(f"nested more than {MAX_DEPTH} levels deep") from None


def loads(data: bytes) -> Any:
    """JSON → Python (:func:`parse_json`'s value)."""
    return parse_json(data)[0]


def _is_text(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate ("\ud800"): JSON can say it, Unicode text cannot hold it
        return False
    return True


def json_problem(value: Any, *, text: bool, limit: int = MAX_DEPTH) -> str | None:
    """What makes a parsed JSON value unfit to forward and log, or None: nested deeper than
    ``limit``, or (``text``) a string or key that is not Unicode text (a lone surrogate)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, str):
            if not _is_text(node):
                return f"a string holds a lone surrogate ({ascii(node)[:40]}…), which is not Unicode text"
            continue
        if not isinstance(node, dict | list):  # a number, true, null: nothing inside
            continue
        if depth > limit:
            return f"nested more than {limit} levels deep"
        if isinstance(node, dict):
            if text:
                stack.extend((k, depth) for k in node)
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:  # null, a number, a boolean: nothing below it (a body of JSON null is one)
            continue
        for child in children:
            if isinstance(child, dict | list) or (text and isinstance(child, str)):
                stack.append((child, depth + 1))
    return None


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


def check_tools(tools: Fields) -> None:
    """The fields of the tool definitions the chat template renders (``tools``)."""
    for tool in tools.objects("tools"):
        fn = tool.obj("function") or tool
        fn.string("name")
        fn.string("description")
        parameters = fn.obj("parameters")
        if parameters is not None:
            parameters.mapping("properties")
            parameters.items("required")


def checked_prefix(messages: list[Any], known: list[Any] | None) -> int:
    """How many leading ``messages`` equal those of ``known`` (a request checked before):
    an agent's history grows by appending, so one C-level comparison usually covers them all."""
    if not known:
        return 0
    n = len(known)
    if len(messages) >= n and messages[:n] == known:
        return n
    k = 0
    for a, b in zip(messages, known, strict=False):
        if a != b:
            break
        k += 1
    return k


def parse_request(body: bytes, known: list[Any] | None = None) -> dict[str, Any]:
    """A chat-completions request body → its JSON object, every field the proxy reads, logs
    or renders checked (the messages as the readers of the call log check them); BadRequest
    naming what is wrong. A request that passes is forwarded, logged and answered.

    ``known``: the messages of a request that passed before (the proxy's previous one): the
    leading messages equal to them were checked then and are not checked again (equal values
    pass the same checks), so a long history costs its new messages only."""
    try:
        req, strict = parse_json(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(400, f"request body is not valid JSON: {exc}") from None
    if not isinstance(req, dict):
        problem = json_problem(req, text=not strict)
        raise BadRequest(400, f"request body: {problem}" if problem else "request body must be a JSON object")
    messages = req.get("messages")
    if not isinstance(messages, list) or not messages:
        problem = json_problem(req, text=not strict)
        if problem is not None:
            raise BadRequest(400, f"request body: {problem}")
        raise BadRequest(400, "'messages' must be a non-empty list of message objects")
    start = checked_prefix(messages, known)
    # the depth and text checks of json_problem, on all but the messages checked before
    # (request → messages → a message: two levels above each message)
    problem = json_problem({k: v for k, v in req.items() if k != "messages"}, text=not strict)
    for m in messages[start:]:
        problem = problem or json_problem(m, text=not strict, limit=MAX_DEPTH - 2)
    if problem is not None:
        raise BadRequest(400, f"request body: {problem}")
    where = Path("request")
    try:
        for i in range(start, len(messages)):
            m = messages[i]
            f = Fields.of(m, where, f"messages[{i}]")
            f.string("role", required=True, null=False)
            check_chat_message(f)
        request = Fields(req, where)
        check_tools(request)
        request.obj("stream_options")
    except RunOutputError as exc:
        raise BadRequest(400, str(exc)) from None
    if "stream" in req and not isinstance(req["stream"], bool | type(None)):
        raise BadRequest(400, "'stream' must be true or false")
    return req


def parse_reply(body: bytes) -> dict[str, Any]:
    """An upstream reply body → its JSON object, every choice checked as the call log's
    readers check a message and its usage as they parse it (:func:`forgetting.prompt.usage.parse_usage`);
    ``ValueError`` naming what is wrong (the call is then a failed one: logged, and answered
    with 502)."""
    data, strict = parse_json(body)
    problem = json_problem(data, text=not strict)
    if problem is not None:
        raise ValueError(problem)
    if not isinstance(data, dict):
        raise ValueError("the reply is not a JSON object")
    reply = Fields(data, Path("upstream reply"))
    try:
        choices = reply.objects("choices")
        for choice in choices:
            message = choice.obj("message")
            if message is not None:
                check_chat_message(message)
            choice.string("finish_reason")
        reply.mapping("usage")
        parse_usage(data.get("usage"), "upstream reply")  # as the call log's readers will parse it
    except RunOutputError as exc:
        raise ValueError(str(exc)) from None
    if not choices:
        raise ValueError("the reply has no choices")
    return data


def summarize_response(data: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(what the call log keeps of a reply — first choice's content, reasoning, tool calls,
    finish reason —, the upstream usage); ``data`` as :func:`parse_reply` checked it."""
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


#: what a redacted credential reads as in the call log
REDACTED = "[redacted]"
_CREDENTIAL_KEYS = frozenset({"api_key", "apikey", "x_api_key", "authorization", "auth", "bearer"})
_CREDENTIAL_WORDS = ("secret", "password", "passwd", "credential")


def is_credential(key: str) -> bool:
    """Whether a request field named ``key`` carries a credential: ``api_key``,
    ``Authorization``, ``x-api-key``, a ``…token`` (``access_token``, ``hf_token``; not a
    count such as ``max_tokens``), or a key naming a secret, password or credential."""
    k = key.lower().replace("-", "_")
    return (
        k in _CREDENTIAL_KEYS
        or k == "token"
        or k.endswith("_token")
        or k.endswith("api_key")
        or any(word in k for word in _CREDENTIAL_WORDS)
    )


def redact(value: Any) -> Any:
    """``value`` with every credential field's value (:func:`is_credential`), at any depth,
    replaced by :data:`REDACTED`: what the call log keeps of a request's parameters."""
    if isinstance(value, dict):
        return {k: REDACTED if isinstance(k, str) and is_credential(k) else redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value
