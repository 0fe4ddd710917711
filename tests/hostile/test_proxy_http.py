"""Hostile inputs for the deletion proxy's HTTP surface: raw HTTP framing, request bodies and
the upstream's replies. Every request is either rejected with a 4xx before it is forwarded
(the upstream sees nothing, the call log gains nothing), or forwarded, logged (one more call
record, a failed one for a reply that is no chat completion) and answered — with no exception
in a handler thread, no hang, a call log that still reads strictly and prices with
``forgetting cost``, and a proxy that still serves."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forgetting.grid import paper_configuration
from forgetting.records.calllog import read_call_log
from forgetting.run.proxy import ProxySettings, start_proxy
from forgetting.run.proxy.server import ProxyServer
from forgetting_testkit.fakes.openai_upstream import FakeUpstream
from forgetting_testkit.histories import SYSTEM, TASK
from forgetting_testkit.hostile import Outcome, socket_exchange
from forgetting_testkit.proxy_client import TOOLS

SETTINGS = ProxySettings.from_parts(
    {"retries": 1, "backoff_s": 0.01, "backoff_max_s": 0.02, "timeout_s": 5, "idle_timeout_s": 2}
)
ASSISTANT = {"role": "assistant", "content": "I look.", "tool_calls": [
    {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]}
TOOL = {"role": "tool", "tool_call_id": "c1", "content": "a.py\nb.py\n"}
GOOD = {"model": "m", "messages": [SYSTEM, TASK, ASSISTANT, TOOL], "tools": TOOLS, "max_tokens": 64}


@dataclass
class Proxy:
    url: str
    host: str
    port: int
    upstream: FakeUpstream
    log: Path
    errors: list[BaseException]


@pytest.fixture(scope="module")
def proxy(tmp_path_factory) -> Iterator[Proxy]:
    errors: list[BaseException] = []
    original = ProxyServer.handle_error

    def record(self: Any, request: Any, client_address: Any) -> None:  # an exception escaped a handler
        import sys

        errors.append(sys.exc_info()[1])  # type: ignore[arg-type]

    ProxyServer.handle_error = record  # type: ignore[method-assign]
    log = tmp_path_factory.mktemp("proxy-log")
    with (
        FakeUpstream() as up,
        start_proxy(up.url, paper_configuration("immediate-token-both-50"), 3, log, "mini/x/t/1",
                    actions=None, settings=SETTINGS) as px,
    ):
        yield Proxy(px.url, px.host, px.port, up, log / "calls.jsonl", errors)
    ProxyServer.handle_error = original  # type: ignore[method-assign]


def raw_exchange(p: Proxy, data: bytes, *, timeout: float = 10.0) -> tuple[int | None, bytes, bool]:
    """Send ``data`` on a fresh connection; (status of the first reply or None, what came back,
    whether the proxy answered within ``timeout``)."""
    return socket_exchange(p.host, p.port, data, timeout=timeout, half_close=True)


def post(body: bytes, extra_headers: bytes = b"") -> bytes:
    return (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n" + extra_headers
            + b"\r\n" + body)


def framed(head: bytes, body: bytes = b"") -> bytes:
    return b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + head + b"\r\n" + body


def judge(p: Proxy, tally: Any, surface: str, exchange: Callable[[], tuple[int | None, bytes, bool]],
          *, expect: str = "any") -> tuple[int | None, bytes]:
    """Run one exchange and hold it to the contract (module docstring)."""
    seen, failed_before = len(p.upstream.chat_requests()), len(p.errors)
    log_before = read_call_log(p.log)
    calls_before = len(log_before.calls) + len(log_before.failed)
    status, reply, answered = exchange()
    log = read_call_log(p.log)  # strict: a torn or corrupt log raises
    calls_after = len(log.calls) + len(log.failed)
    forwarded = len(p.upstream.chat_requests()) - seen
    problems = []
    if not answered or status is None:
        problems.append(f"no answer (status {status}): {reply[:200]!r}")
    elif forwarded and calls_after != calls_before + 1:
        problems.append(f"forwarded, answered {status}, but {calls_after - calls_before} calls logged")
    elif not forwarded and calls_after != calls_before:
        problems.append(f"not forwarded, answered {status}, but {calls_after - calls_before} calls logged")
    elif not forwarded and status == 200 and b"/health" not in reply and b'"status": "ok"' not in reply:
        problems.append(f"200 without forwarding: {reply[:200]!r}")
    if expect == "4xx" and not (status is not None and 400 <= status < 500):
        problems.append(f"expected a 4xx, got {status}: {reply[:300]!r}")
    if expect == "forwarded" and not forwarded:
        problems.append(f"expected it forwarded, got {status}: {reply[:300]!r}")
    health = raw_exchange(p, b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    if health[0] != 200:
        problems.append(f"the proxy no longer serves: {health}")
    escaped = p.errors[failed_before:]
    outcome = Outcome([surface], 0, "", "", traceback=repr(escaped) if escaped else None, hang=not answered)
    found = tally.record(surface, outcome, more=problems, klass="hostile HTTP request to the proxy")
    assert not found, found
    return status, reply


# -- framing ---------------------------------------------------------------------------------------------

FRAMES: dict[str, bytes] = {
    "Content-Length negative": framed(b"Content-Length: -5\r\n", b"{}"),
    "Content-Length -1 with a large body": framed(b"Content-Length: -1\r\n", b"x" * 100_000),
    "Content-Length with a sign": framed(b"Content-Length: +2\r\n", b"{}"),
    "Content-Length with underscores": framed(b"Content-Length: 1_0\r\n", b"0123456789"),
    "Content-Length not a number": framed(b"Content-Length: lots\r\n", b"{}"),
    "Content-Length beyond the limit": framed(b"Content-Length: 999999999999\r\n", b"{}"),
    "Content-Length of 30 digits": framed(b"Content-Length: " + b"9" * 30 + b"\r\n", b"{}"),
    "no Content-Length": framed(b"", b"{}"),
    "a body shorter than its Content-Length": framed(b"Content-Length: 100\r\n", b"{}"),
    "chunked: a chunk size not hex": framed(b"Transfer-Encoding: chunked\r\n", b"zz\r\n{}\r\n0\r\n\r\n"),
    "chunked: a negative chunk size": framed(b"Transfer-Encoding: chunked\r\n", b"-2\r\n{}\r\n0\r\n\r\n"),
    "chunked: an empty size line": framed(b"Transfer-Encoding: chunked\r\n", b"\r\n{}\r\n0\r\n\r\n"),
    "chunked: a size line of 10000 bytes": framed(b"Transfer-Encoding: chunked\r\n", b"1" * 10000 + b"\r\n"),
    "chunked: a chunk beyond the limit": framed(b"Transfer-Encoding: chunked\r\n", b"fffffffff\r\n{}"),
    "chunked: a chunk without CRLF": framed(b"Transfer-Encoding: chunked\r\n", b"2\r\n{}XX0\r\n\r\n"),
    "chunked: a chunk cut short": framed(b"Transfer-Encoding: chunked\r\n", b"ff\r\n{}"),
    "chunked: endless trailers": framed(b"Transfer-Encoding: chunked\r\n", b"0\r\n" + b"X-T: 1\r\n" * 200),
    "chunked: a chunk size with 20 hex digits": framed(b"Transfer-Encoding: chunked\r\n",
                                                      b"1" + b"0" * 19 + b"\r\n{}"),
    "a garbage request line": b"HELLO THERE\r\n\r\n",
    "an unknown method": b"BREW /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    "a request line of 70000 bytes": b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n",
    "200 headers": b"GET /health HTTP/1.1\r\n" + b"X-A: 1\r\n" * 200 + b"\r\n",
    "GET on chat completions": b"GET /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    "POST to /v1/models with a bad body": b"POST /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                                          b"Content-Length: -3\r\n\r\n",
    "POST to an unknown path": b"POST /v2/everything HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
                               b"Connection: close\r\n\r\n{}",
    "a path with a query and a NUL": b"GET /health?x=\x00 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
}


@pytest.mark.parametrize("name", FRAMES)
def test_hostile_framing(proxy, tally, name):
    status, _ = judge(proxy, tally, "proxy http", lambda: raw_exchange(proxy, FRAMES[name]))
    assert (status is not None and status != 200) or name.startswith("a path with")


# -- request bodies -------------------------------------------------------------------------------------

def _with(message_index: int | None = None, **fields: Any) -> bytes:
    body = json.loads(json.dumps(GOOD))
    if message_index is None:
        body.update(fields)
    else:
        body["messages"][message_index].update(fields)
    return json.dumps(body).encode()


def _call(**fn: Any) -> bytes:
    body = json.loads(json.dumps(GOOD))
    body["messages"][2]["tool_calls"][0]["function"].update(fn)
    return json.dumps(body).encode()


def _nested(n: int) -> bytes:
    return b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "extra": ' + b"[" * n + b"]" * n + b"}"


BODIES: dict[str, bytes] = {
    "not JSON": b"{not json",
    "not UTF-8": b'{"model": "\xff"}',
    "a JSON list": b"[1, 2]",
    "JSON nested 100000 deep": b"[" * 100_000 + b"]" * 100_000,
    "JSON nested 1000 deep in a field": _nested(1000),
    "JSON nested 70 deep in a field": _nested(70),
    "a lone surrogate in content": _with(1, content="\ud800"),  # json.dumps writes it as the escape \ud800
    "a lone surrogate in a key": b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "\\udc00": 1}',
    "tool_calls [1]": _with(2, tool_calls=[1]),
    "tool_calls a string": _with(2, tool_calls="nope"),
    "a tool call without function": _with(2, tool_calls=[{"id": "c1"}]),
    "a function a list": _with(2, tool_calls=[{"id": "c1", "function": []}]),
    "a function name a number": _call(name=5),
    "arguments a number": _call(arguments=5),
    "arguments nested 3000 deep": _call(arguments="[" * 3000 + "]" * 3000),
    "content a number": _with(3, content=5),
    "content [1]": _with(1, content=[1]),
    "content parts with a numeric text": _with(1, content=[{"type": "text", "text": 5}]),
    "role missing": json.dumps({**GOOD, "messages": [{"content": "x"}]}).encode(),
    "role a number": _with(1, role=3),
    "reasoning_content a list": _with(2, reasoning_content=["x"]),
    "tool_call_id a number": _with(3, tool_call_id=7),
    "messages an object": _with(messages={}),
    "messages empty": _with(messages=[]),
    "messages null": _with(messages=None),
    "a message a string": _with(messages=["hi"]),
    "tools [1]": _with(tools=[1]),
    "tools an object": _with(tools={}),
    "a tool's function a list": _with(tools=[{"type": "function", "function": []}]),
    "a tool's parameters a list": _with(tools=[{"type": "function", "function": {"name": "b", "parameters": []}}]),
    "a tool's properties a list": _with(tools=[{"function": {"name": "b", "parameters": {"properties": []}}}]),
    "a tool's required a string": _with(tools=[{"function": {"name": "b", "parameters": {"required": "x"}}}]),
    "a tool's name a number": _with(tools=[{"function": {"name": 9}}]),
    "stream a string": _with(stream="yes"),
    "stream_options a list": _with(stream=True, stream_options=[]),
    "temperature NaN": json.dumps(GOOD).encode().replace(b'"max_tokens": 64', b'"temperature": NaN'),
    "max_tokens 2^70": _with(max_tokens=2**70),
    "a role nobody knows": _with(1, role="narrator"),
    "a tool message first": _with(messages=[TOOL]),
    "an assistant without content": _with(2, content=None),
    "10000 empty messages": _with(messages=[{"role": "user", "content": ""}] * 10000),
}
FORWARDED = {"temperature NaN", "max_tokens 2^70", "a role nobody knows", "a tool message first",
             "an assistant without content", "10000 empty messages", "arguments nested 3000 deep"}


@pytest.mark.parametrize("name", BODIES)
def test_hostile_request_bodies(proxy, tally, name):
    expect = "forwarded" if name in FORWARDED else "4xx"
    judge(proxy, tally, "proxy http", lambda: raw_exchange(proxy, post(BODIES[name])), expect=expect)


def test_credentials_in_a_request_are_forwarded_and_never_logged(proxy, tally):
    secret = "sk-live-0123456789"
    body = json.dumps({**GOOD, "api_key": secret, "extra_body": {"x-api-key": secret, "auth_token": secret,
                                                                  "client_secret": secret, "password": secret},
                       "max_completion_tokens": 32}).encode()
    status, _ = judge(proxy, tally, "proxy http", lambda: raw_exchange(
        proxy, post(body, b"Authorization: Bearer " + secret.encode() + b"\r\nX-Api-Key: " + secret.encode()
                    + b"\r\n")), expect="forwarded")
    assert status == 200
    assert proxy.upstream.chat_requests()[-1].body["api_key"] == secret  # the upstream gets what it needs
    text = proxy.log.read_text()
    assert secret not in text
    params = read_call_log(proxy.log).calls[-1].params
    assert params["api_key"] == "[redacted]" and params["max_completion_tokens"] == 32
    assert set(params["extra_body"].values()) == {"[redacted]"}


# -- upstream replies ------------------------------------------------------------------------------------

def _reply(**message: Any) -> bytes:
    return json.dumps({"id": "x", "choices": [{"index": 0, "finish_reason": "stop",
                                              "message": {"role": "assistant", "content": "ok", **message}}],
                       "usage": {"prompt_tokens": 1, "completion_tokens": 1}}).encode()


REPLIES: dict[str, tuple[int | None, bytes]] = {
    "not JSON": (200, b"<html>oops</html>"),
    "empty": (200, b""),
    "a JSON list": (200, b"[1]"),
    "no choices": (200, b'{"id": "x"}'),
    "choices empty": (200, b'{"choices": []}'),
    "choices [1]": (200, b'{"choices": [1]}'),
    "a second choice a string": (200, json.dumps({"choices": [{"message": {"content": "a"}}, "b"]}).encode()),
    "tool_calls [1]": (200, _reply(tool_calls=[1])),
    "tool_calls a string": (200, _reply(tool_calls="nope")),
    "a tool call without function": (200, _reply(tool_calls=[{"id": "c"}])),
    "a function name a number": (200, _reply(tool_calls=[{"id": "c", "function": {"name": 3}}])),
    "content a number": (200, _reply(content=5)),
    "content a lone surrogate": (200, _reply(content="\ud800")),
    "reasoning a list": (200, _reply(reasoning_content=[])),
    "finish_reason a number": (200, json.dumps({"choices": [{"message": {"content": "a"}, "finish_reason": 1}]})
                               .encode()),
    "usage a string": (200, json.dumps({"choices": [{"message": {"content": "a"}}], "usage": "x"}).encode()),
    "nested 100000 deep": (200, b"[" * 100_000 + b"]" * 100_000),
    "usage nested 200 deep": (200, json.dumps({"choices": [{"message": {"content": "a"}}]}).encode()[:-1]
                              + b', "usage": {"x": ' + b"[" * 200 + b"]" * 200 + b"}}"),
    "a 500 with garbage": (500, b"\xff\xfe garbage"),
    "a 404 with JSON": (404, b'{"error": {"message": "no model"}}'),
    "a dropped connection": (None, b""),
    "a 200 with NaN usage": (200, json.dumps({"choices": [{"message": {"content": "a"}}]}).encode()[:-1]
                             + b', "usage": {"completion_tokens": NaN}}'),
    "a 200 with a negative prompt_tokens": (200, json.dumps({"choices": [{"message": {"content": "a"}}],
                                                             "usage": {"prompt_tokens": -3}}).encode()),
    "a 200 with more cached than prompt tokens": (200, json.dumps({
        "choices": [{"message": {"content": "a"}}],
        "usage": {"prompt_tokens": 3, "prompt_tokens_details": {"cached_tokens": 9}}}).encode()),
}


@pytest.mark.parametrize("name", REPLIES)
def test_hostile_upstream_replies_are_answered_and_logged(proxy, tally, name):
    status, body = REPLIES[name]
    proxy.upstream.fail_next(status, times=2, body=body)  # a retried status fails its retry too
    got, _ = judge(proxy, tally, "proxy upstream", lambda: raw_exchange(proxy, post(json.dumps(GOOD).encode())),
                   expect="forwarded")
    proxy.upstream.failures.clear()
    log = read_call_log(proxy.log)
    assert got != 200 and log.failed and log.failed[-1]["status"] == got  # a reply the log's readers refuse
    from forgetting.cost import cost_run, load_profiles

    cost_run(proxy.log, load_profiles(None, ["paper"]))  # the log still prices


# -- property-based -------------------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=12),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(
        st.sampled_from(["role", "content", "tool_calls", "function", "name", "arguments", "id", "type", "text",
                         "tool_call_id", "reasoning_content"]) | st.text(max_size=6), children, max_size=4),
    max_leaves=10,
)
PROPERTY = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@PROPERTY
@given(messages=st.lists(JSON, min_size=1, max_size=4), extra=st.dictionaries(st.text(max_size=8), JSON, max_size=3))
def test_any_request_is_rejected_or_served(proxy, tally, messages, extra):
    body = json.dumps({"model": "m", **extra, "messages": [SYSTEM, *messages]}, allow_nan=True).encode()
    judge(proxy, tally, "property: proxy request", lambda: raw_exchange(proxy, post(body)))


@PROPERTY
@given(message=st.dictionaries(st.sampled_from(["role", "content", "tool_calls", "reasoning_content"]), JSON,
                               max_size=4), usage=JSON)
def test_any_upstream_reply_is_answered_and_logged(proxy, tally, message, usage):
    reply = json.dumps({"choices": [{"message": message, "finish_reason": "stop"}], "usage": usage},
                       allow_nan=True).encode()
    proxy.upstream.fail_next(200, body=reply)
    judge(proxy, tally, "property: proxy reply", lambda: raw_exchange(proxy, post(json.dumps(GOOD).encode())),
          expect="forwarded")
    from forgetting.cost import cost_run, load_profiles

    cost_run(proxy.log, load_profiles(None, ["paper"]))
