"""Test double for an OpenAI-compatible model server (vLLM needs a GPU; none here).

It stands in for the *model*, never for the proxy: it records every request it receives
(path, headers, JSON body) and answers chat completions with a canned agent-like reply in
either message style (a ``bash`` tool call, or a fenced ``mswea_bash_command`` block), with
usage figures. Failures can be queued: an HTTP status with a body and ``Retry-After``, or a
connection dropped without a reply.

In-process (tests)::

    with FakeUpstream(style="text") as up:   # up.url == "http://127.0.0.1:PORT/v1"
        up.fail_next(503, times=2)

As a process (benchmarks/proxy.py)::

    python testkit/src/forgetting_testkit/fakes/openai_upstream.py [--port P] [--style tool_calls|text]
"""

from __future__ import annotations

import argparse
import json
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Failure:
    status: int | None  # None: drop the connection without replying
    body: bytes
    retry_after: str | None = None


def canned_reply(request: dict[str, Any], style: str, n: int) -> dict[str, Any]:
    """The n-th reply (1-based): reads a file, as an agent would."""
    command = f"cat src/module_{n}.py"
    thought = f"THOUGHT: step {n}: the bug may be in module {n}; I read it before editing."
    if style == "text":
        message: dict[str, Any] = {
            "role": "assistant",
            "content": f"{thought}\n\n```mswea_bash_command\n{command}\n```",
        }
        finish = "stop"
    else:
        message = {
            "role": "assistant",
            "content": thought,
            "tool_calls": [
                {
                    "id": f"call_{n}",
                    "type": "function",
                    "function": {"name": "bash", "arguments": json.dumps({"command": command})},
                }
            ],
        }
        finish = "tool_calls"
    prompt_chars = len(json.dumps(request.get("messages", [])))
    prompt_tokens = prompt_chars // 4  # a rough count: no tokenizer here
    return {
        "id": f"chatcmpl-fake-{n}",
        "object": "chat.completion",
        "created": 1700000000 + n,
        "model": request.get("model", "fake"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": 30,
            "total_tokens": prompt_tokens + 30,
            # one more 16-token block per call, never more than the prompt (a usage report must be
            # consistent: forgetting.prompt.usage refuses cached tokens beyond prompt_tokens)
            "prompt_tokens_details": {"cached_tokens": min(16 * (n - 1), prompt_tokens)},
        },
    }


class FakeUpstream:
    """An OpenAI-compatible test double in a background thread."""

    def __init__(
        self, style: str = "tool_calls", host: str = "127.0.0.1", port: int = 0, record: bool = True
    ) -> None:
        self.style = style
        self.record = record
        self.requests: list[Recorded] = []
        self.failures: deque[Failure] = deque()
        self.completions = 0
        self.delay_s = 0.0  # seconds each chat completion takes
        self.in_flight = 0  # chat completions being answered now …
        self.max_in_flight = 0  # … and at most so far
        self.arrivals: list[float] = []  # when each chat completion arrived (unix time)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((host, port), self._handler())
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.url = f"http://{host}:{self.port}/v1"
        self._thread: threading.Thread | None = None

    def fail_next(
        self, status: int | None, times: int = 1, body: Any = None, retry_after: str | None = None
    ) -> None:
        """Queue failures: an HTTP status (``body`` as JSON, or bytes), or None to drop the connection."""
        if body is None and status is not None:
            body = {"error": {"message": f"fake upstream failure {status}", "type": "fake", "code": status}}
        raw = body if isinstance(body, bytes) else json.dumps(body).encode() if body is not None else b""
        for _ in range(times):
            self.failures.append(Failure(status, raw, retry_after))

    def chat_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: bytes, extra: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for k, v in (extra or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def _fail(self) -> bool:
                with fake._lock:
                    failure = fake.failures.popleft() if fake.failures else None
                if failure is None:
                    return False
                if failure.status is None:
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return True
                extra = {"Retry-After": failure.retry_after} if failure.retry_after else None
                self._send(failure.status, failure.body, extra)
                return True

            def do_GET(self) -> None:
                with fake._lock:
                    fake.requests.append(Recorded("GET", self.path, dict(self.headers), None))
                if self._fail():
                    return
                if self.path == "/v1/models":
                    self._send(
                        200,
                        json.dumps({"object": "list", "data": [{"id": "fake", "object": "model"}]}).encode(),
                    )
                else:
                    self._send(404, b'{"error": {"message": "not found"}}')

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                body = json.loads(raw)
                with fake._lock:
                    if fake.record:
                        fake.requests.append(Recorded("POST", self.path, dict(self.headers), body))
                if self._fail():
                    return
                if self.path != "/v1/chat/completions":
                    self._send(404, b'{"error": {"message": "not found"}}')
                    return
                with fake._lock:
                    fake.arrivals.append(time.time())
                    fake.in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                try:
                    if fake.delay_s:
                        time.sleep(fake.delay_s)
                finally:
                    with fake._lock:
                        fake.in_flight -= 1
                with fake._lock:
                    fake.completions += 1
                    n = fake.completions
                self._send(200, json.dumps(canned_reply(body, fake.style, n)).encode())

        return Handler

    def start(self) -> FakeUpstream:
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeUpstream:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="an OpenAI-compatible test double (the model's stand-in)")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--style", default="tool_calls", choices=["tool_calls", "text"])
    args = parser.parse_args()
    up = FakeUpstream(style=args.style, port=args.port, record=False)
    print(up.url, flush=True)
    up._server.serve_forever()
