"""The proxy's limits and its promise that every request is either rejected with a 4xx before
it is forwarded, or forwarded, logged and answered (issue 17's regressions)."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from forgetting.cost import cost_run, load_profiles
from forgetting.foundation.errors import UserError
from forgetting.grid import paper_configuration
from forgetting.records.calllog import read_call_log
from forgetting.run.proxy import ProxySettings, start_proxy
from forgetting_testkit.fakes.openai_upstream import FakeUpstream
from forgetting_testkit.histories import SYSTEM, TASK
from forgetting_testkit.proxy_client import FAST, request

#: the schema's proxy settings
PROXY_DEFAULTS = ProxySettings.from_parts()

BASELINE = paper_configuration("baseline")
ASSISTANT = {"role": "assistant", "content": "I look.", "tool_calls": [
    {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]}
TOOL = {"role": "tool", "tool_call_id": "c1", "content": "a.py\n"}


def chat(url: str, messages: list, **extra) -> tuple[int, object]:
    return request(url, "POST", "/v1/chat/completions", {"model": "m", "messages": messages, **extra})


def raw(px, data: bytes) -> bytes:
    with socket.create_connection((px.host, px.port), timeout=10) as s:
        s.sendall(data)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


@pytest.mark.parametrize(
    ("what", "messages", "fragment"),
    [
        ("tool_calls [1]", [SYSTEM, TASK, {**ASSISTANT, "tool_calls": [1]}, TOOL],
         "messages[2].tool_calls[0] is the number 1"),
        ("a lone surrogate", [SYSTEM, TASK, ASSISTANT, {**TOOL, "content": "\ud800"}], "lone surrogate"),
        ("tool_calls a string", [SYSTEM, TASK, {**ASSISTANT, "tool_calls": "nope"}, TOOL],
         "messages[2].tool_calls is a string"),
    ],
)
def test_a_request_the_log_cannot_hold_is_rejected_before_it_is_forwarded(tmp_path, what, messages, fragment):
    with (
        FakeUpstream() as up,
        start_proxy(up.url, BASELINE, 1, tmp_path, "r", settings=FAST, actions=None) as px,
    ):
        status, reply = chat(px.url, messages)
        assert status == 400 and fragment in reply["error"]["message"], reply
        assert not up.chat_requests()  # never forwarded
        assert chat(px.url, [SYSTEM, TASK])[0] == 200  # and the proxy serves on
    log = read_call_log(tmp_path / "calls.jsonl")
    assert len(log.calls) == 1 and not log.failed


@pytest.mark.parametrize(
    ("what", "reply"),
    [
        ("tool_calls [1]", {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [1]}}]}),
        ("content a lone surrogate", {"choices": [{"message": {"role": "assistant", "content": "\ud800"}}]}),
        ("a second choice a number", {"choices": [{"message": {"content": "a"}}, 7]}),
    ],
)
def test_a_reply_that_is_no_chat_completion_is_logged_and_answered(tmp_path, what, reply):
    with (
        FakeUpstream() as up,
        start_proxy(up.url, BASELINE, 1, tmp_path, "r", settings=FAST, actions=None) as px,
    ):
        up.fail_next(200, body=json.dumps(reply).encode())
        status, answer = chat(px.url, [SYSTEM, TASK], stream=True)
        assert status == 502 and "not a chat completion" in answer["error"]["message"], answer
        assert len(up.chat_requests()) == 1
    log = read_call_log(tmp_path / "calls.jsonl")
    assert not log.calls and len(log.failed) == 1 and log.failed[0]["status"] == 502
    result = cost_run(tmp_path / "calls.jsonl", load_profiles(None, ["paper"]))  # `forgetting cost` reads it
    assert result.calls.num_rows == 0


def test_a_negative_content_length_does_not_bypass_the_body_limit(tmp_path):
    with (
        FakeUpstream() as up,
        start_proxy(up.url, BASELINE, 1, tmp_path, "r", settings=FAST, actions=None) as px,
    ):
        reply = raw(px, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n" + b"{" * 1000)
        assert reply.startswith(b"HTTP/1.1 400") and b"expected a byte count" in reply
        reply = raw(px, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                        b"zz\r\n{}\r\n0\r\n\r\n")
        assert reply.startswith(b"HTTP/1.1 400") and b"bad chunk size" in reply
        assert not up.chat_requests()


def test_stalled_connections_are_closed_and_their_threads_released(tmp_path):
    settings = ProxySettings.from_parts({"retries": 1, "backoff_s": 0.01, "timeout_s": 5, "idle_timeout_s": 1})
    with (
        FakeUpstream() as up,
        start_proxy(up.url, BASELINE, 1, tmp_path, "r", settings=settings, actions=None) as px,
    ):
        before = threading.active_count()
        stalled = []
        for k in range(40):  # half a request line, half a body, nothing at all
            s = socket.create_connection((px.host, px.port), timeout=10)
            s.sendall([b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{",
                       b"GET /hea", b""][k % 3])
            stalled.append(s)
        time.sleep(0.3)
        assert threading.active_count() >= before + 30  # one thread per connection, holding it
        deadline = time.monotonic() + 10
        while threading.active_count() > before + 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert threading.active_count() <= before + 1  # every stalled connection's thread is gone
        for s in stalled:  # and each socket was closed by the proxy
            s.settimeout(2)
            try:
                data = s.recv(65536)
            except ConnectionResetError:
                data = b""
            assert data == b"" or data.startswith(b"HTTP/1.1 ")
            s.close()
        assert chat(px.url, [SYSTEM, TASK])[0] == 200  # an agent between two calls reconnects


def test_a_run_id_that_cannot_travel_in_a_header_is_refused(tmp_path):
    for run_id in ("a\r\nX-Evil: 1", "café", "two words", "", "x" * 600):
        with pytest.raises(UserError, match="--run-id"):
            start_proxy("http://127.0.0.1:9/v1", BASELINE, 1, tmp_path, run_id, actions=None, settings=PROXY_DEFAULTS)
    assert not (tmp_path / "calls.jsonl").exists()


def test_a_proxy_that_cannot_listen_leaves_no_call_log(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        with pytest.raises(UserError, match="cannot listen"):
            start_proxy("http://127.0.0.1:9/v1", BASELINE, 1, tmp_path, "run-a", actions=None, port=port,
                        settings=PROXY_DEFAULTS)
    assert not (tmp_path / "calls.jsonl").exists()
    # the next start — another run id, seed or configuration — takes the folder
    with FakeUpstream() as up, start_proxy(up.url, paper_configuration("delayed-turn-both-50"), 2, tmp_path,
                                          "run-b", settings=FAST, actions=None) as px:
        assert chat(px.url, [SYSTEM, TASK])[0] == 200
    assert read_call_log(tmp_path / "calls.jsonl").header["run_id"] == "run-b"


def test_credentials_are_redacted_in_the_call_log_and_forwarded_upstream(tmp_path):
    secret = "sk-live-abcdef0123"
    with (
        FakeUpstream() as up,
        start_proxy(up.url, BASELINE, 1, tmp_path, "r", settings=FAST, actions=None) as px,
    ):
        status, _ = chat(px.url, [SYSTEM, TASK], api_key=secret, max_tokens=10,
                         extra_body={"x-api-key": secret, "hf_token": secret, "client_secret": secret,
                                     "nested": [{"password": secret}], "top_logprobs": 2})
        assert status == 200
        sent = up.chat_requests()[0].body
        assert sent["api_key"] == secret and sent["extra_body"]["hf_token"] == secret
    text = (tmp_path / "calls.jsonl").read_text()
    assert secret not in text
    params = read_call_log(tmp_path / "calls.jsonl").calls[0].params
    assert params["api_key"] == "[redacted]" and params["max_tokens"] == 10
    assert params["extra_body"] == {"x-api-key": "[redacted]", "hf_token": "[redacted]",
                                    "client_secret": "[redacted]", "nested": [{"password": "[redacted]"}],
                                    "top_logprobs": 2}


@pytest.mark.parametrize("key", ["api_key", "Authorization", "x-api-key", "access_token", "auth_token", "token",
                                 "client_secret", "password", "db_passwd", "credentials", "openai_api_key"])
def test_credential_keys(key):
    from forgetting.run.proxy.openai_api import is_credential

    assert is_credential(key)


@pytest.mark.parametrize("key", ["max_tokens", "max_completion_tokens", "skip_special_tokens", "top_logprobs",
                                 "allowed_token_ids", "model", "temperature", "stop"])
def test_not_credential_keys(key):
    from forgetting.run.proxy.openai_api import is_credential

    assert not is_credential(key)
