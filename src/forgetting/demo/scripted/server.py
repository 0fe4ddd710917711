"""The scripted model over HTTP: an OpenAI-compatible server on loopback.

Endpoints: ``POST /v1/chat/completions``, ``GET /v1/models``, ``GET /health``, and vLLM's
``POST /tokenize`` for chat messages (the prompt's token ids: what a provider in front of it
needs to apply its own cache rule, ``forgetting_testkit.fakes.provider``). The seed
header ``X-Forgetting-Seed`` (added by the deletion proxy) keys the per-run draws.

In-process use (tests, the runner)::

    with ScriptedModelServer(tasks_dir, settings=settings).start() as server:
        ...  # point the agent (or the proxy's upstream) at server.url  ("http://127.0.0.1:PORT/v1")
"""

from __future__ import annotations

import json
import socket
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from forgetting.demo.scripted.knowledge import TaskBook
from forgetting.demo.scripted.model import FINGERPRINT, SEED_HEADER, STAND_IN, BadRequest, ScriptedModel
from forgetting.demo.scripted.settings import ScriptedSettings
from forgetting.prompt import tokenizer

MAX_BODY = 64 * 1024 * 1024


def _handler(model: ScriptedModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "forgetting-scripted-stand-in"

        def setup(self) -> None:
            super().setup()
            # headers and body go out as separate writes: without this, Nagle's algorithm and the
            # client's delayed ACK hold every reply on a kept-alive connection for ~40 ms
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, format: str, *args: Any) -> None:  # quiet: the proxy logs calls
            return

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload, ensure_ascii=False).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: HTTPStatus, message: str) -> None:
            kind = "invalid_request_error" if status < 500 else "server_error"
            self._send(status, {"error": {"message": message, "type": kind, "code": int(status)}})

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0].rstrip("/")
            if path in ("/health", "/v1/health"):
                self._send(200, {"status": "ok", "model": model.served_name, "stand_in": STAND_IN})
            elif path == "/metrics":
                # its prefix cache's block, as vLLM publishes it (an info gauge whose labels are
                # the cache config: vLLM's vllm/v1/metrics/loggers.py), read by the batch
                text = (f'vllm:cache_config_info{{block_size="{model.cache.block_size}",'
                        'enable_prefix_caching="True"} 1.0\n').encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(text)))
                self.end_headers()
                self.wfile.write(text)
            elif path == "/v1/models":
                self._send(
                    200,
                    {
                        "object": "list",
                        "data": [
                            {
                                "id": model.served_name,
                                "object": "model",
                                "created": 0,
                                "owned_by": FINGERPRINT,
                                "description": STAND_IN,
                            }
                        ],
                    },
                )
            else:
                self._error(HTTPStatus.NOT_FOUND, f"no route {self.path}")

        def do_POST(self) -> None:
            path = self.path.split("?", 1)[0].rstrip("/")
            if path not in ("/v1/chat/completions", "/chat/completions", "/tokenize"):
                self._error(HTTPStatus.NOT_FOUND, f"no route {self.path}")
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if not 0 < length <= MAX_BODY:
                self._error(HTTPStatus.BAD_REQUEST, "a JSON body with Content-Length is required")
                return
            try:
                request = json.loads(self.rfile.read(length))
                if path == "/tokenize":
                    response = model.tokenize(request)
                else:
                    response = model.complete(request, self.headers.get(SEED_HEADER))
            except (json.JSONDecodeError, UnicodeDecodeError):
                self._error(HTTPStatus.BAD_REQUEST, "the body is not valid JSON")
                return
            except BadRequest as exc:
                self._error(HTTPStatus.BAD_REQUEST, str(exc))
                return
            except Exception as exc:  # report, keep serving other runs
                self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")
                return
            self._send(200, response)

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class ScriptedModelServer:
    """The scripted model served on ``host:port`` (port 0: a free port) from a thread."""

    def __init__(
        self,
        tasks_dir: str | Path | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        settings: ScriptedSettings,
        served_name: str = "scripted",
        book: TaskBook | None = None,
    ) -> None:
        if book is None:
            if tasks_dir is None:
                raise ValueError("give tasks_dir or book")
            book = TaskBook.load(tasks_dir)
        self.model = ScriptedModel(book, settings, served_name=served_name)
        tokenizer.encoding()  # load the vocabulary now, not on the first request
        self._httpd = _Server((host, port), _handler(self.model))
        self._thread: threading.Thread | None = None
        self._foreground = False
        self._closed = False
        self._lock = threading.Lock()

    @property
    def host(self) -> str:
        return str(self._httpd.server_address[0])

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def root_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def url(self) -> str:
        """The OpenAI base URL (``api_base``), ending in ``/v1``."""
        return self.root_url + "/v1"

    def start(self) -> ScriptedModelServer:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever, name="scripted-model", daemon=True
            )
            self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in the calling thread until :meth:`stop` (from another thread) or an interrupt."""
        self._foreground = True
        try:
            self._httpd.serve_forever()
        finally:
            self._foreground = False

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent; call it from any thread but the
        one running :meth:`serve_forever`)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._thread is not None or self._foreground:
            self._httpd.shutdown()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
