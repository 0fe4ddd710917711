"""The deletion proxy: an OpenAI-compatible HTTP server between an agent and its model.

``POST /v1/chat/completions``
    the request's ``messages`` are reduced by the run's deletion configuration (one
    :class:`~forgetting.deletion.Reducer` per proxy, so one proxy serves one run) and the
    request goes upstream otherwise unchanged (model, tools, temperature, max_tokens, …;
    a request nothing was deleted from is forwarded byte for byte). Upstream it carries
    ``X-Forgetting-Run: <run id>`` and ``X-Forgetting-Seed: <seed>`` besides the client's
    ``Authorization``. Every call is appended to the call log (``calls.jsonl``) *before* the
    reply goes back, so whatever the agent saw is on disk. Upstream failures are retried
    (:mod:`forgetting.proxy.upstream`), then returned as an OpenAI-style error with the
    upstream's status and logged as a failed call.
``GET /v1/models``
    forwarded upstream.
``GET /health``
    the proxy's own state (run, configuration, calls logged); does not call upstream.

The paths are also served without the ``/v1`` prefix. The server is the standard library's
``ThreadingHTTPServer`` (keep-alive, ``TCP_NODELAY``) with orjson for the request body: on a
100k-token history the proxy adds 1–2.5 ms per call (``benchmarks/proxy.py``), far below a
model's latency, without an async framework to depend on.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import socket
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from forgetting import chat_format, tokenizer
from forgetting.calllog import FILENAME, CallLogWriter, read_call_log
from forgetting.deletion import Reducer
from forgetting.deletion.policy import PolicyError
from forgetting.errors import UserError
from forgetting.grid import Deletion
from forgetting.messages import ActionSyntax
from forgetting.proxy.openai_api import (
    BadRequest,
    dumps,
    error_body,
    loads,
    parse_request,
    sse_stream,
    summarize_response,
    upstream_error_body,
)
from forgetting.proxy.settings import ProxySettings
from forgetting.proxy.upstream import Access, Upstream

RUN_HEADER = "X-Forgetting-Run"
SEED_HEADER = "X-Forgetting-Seed"
_FORWARDED_HEADERS = ("Authorization", "OpenAI-Organization", "OpenAI-Project")
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


class ProxyServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(
        self,
        address: tuple[str, int],
        *,
        upstream: Upstream,
        reducer: Reducer,
        log: CallLogWriter,
        run_id: str,
        seed: int,
        settings: ProxySettings,
    ) -> None:
        super().__init__(address, ProxyHandler)
        self.upstream = upstream
        self.reducer = reducer
        self.log = log
        self.run_id = run_id
        self.seed = seed
        self.settings = settings
        self.calls_ok = 0
        self.calls_failed = 0
        self._count_lock = threading.Lock()

    def count(self, ok: bool) -> None:
        with self._count_lock:
            if ok:
                self.calls_ok += 1
            else:
                self.calls_failed += 1


class ProxyHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ProxyServer

    def setup(self) -> None:
        super().setup()
        # replies are written as headers + body; without this, Nagle's algorithm and the
        # client's delayed ACK hold the body back ~40 ms on every keep-alive call
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # every call is in the call log; no access log on stderr

    # -- plumbing ------------------------------------------------------------------------
    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        self._send(status, error_body(message, status, kind))

    def _route(self) -> str:
        path = self.path.split("?", 1)[0].rstrip("/")
        return path[3:] if path.startswith("/v1/") else path

    def _read_body(self) -> bytes:
        limit = self.server.settings.max_request_bytes
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks, total = [], 0
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                total += size
                if total > limit:
                    raise BadRequest(413, f"request body is larger than {limit} bytes")
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = self.headers.get("Content-Length")
        if length is None:
            raise BadRequest(411, "a request body needs a Content-Length header")
        try:
            n = int(length)
        except ValueError:
            raise BadRequest(400, f"bad Content-Length {length!r}") from None
        if n > limit:
            raise BadRequest(413, f"request body is larger than {limit} bytes")
        return self.rfile.read(n)

    def _upstream_headers(self) -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            RUN_HEADER: self.server.run_id,
            SEED_HEADER: str(self.server.seed),
        }
        for name in _FORWARDED_HEADERS:
            value = self.headers.get(name)
            if value is not None:
                headers[name] = value
        return headers

    # -- endpoints -----------------------------------------------------------------------
    def do_GET(self) -> None:
        route = self._route()
        if route == "/health":
            s = self.server
            body = {
                "status": "ok",
                "run_id": s.run_id,
                "deletion": s.reducer.deletion.name,
                "seed": s.seed,
                "upstream": s.upstream.url,
                "calls": s.calls_ok,
                "failed_calls": s.calls_failed,
            }
            self._send(200, json.dumps(body).encode())
        elif route == "/models":
            reply = self.server.upstream.request("GET", "/models", None, self._upstream_headers())
            if reply.ok:
                self._send(reply.status, reply.body, reply.headers.get("content-type", "application/json"))
            else:
                body = upstream_error_body(reply.status, reply.body, reply.error or "upstream error")
                self._send(reply.status, body)
        elif route == "/chat/completions":
            self._error(405, "use POST for /v1/chat/completions")
        else:
            self._error(404, f"no such endpoint: GET {self.path}")

    def do_POST(self) -> None:
        route = self._route()
        if route != "/chat/completions":
            with contextlib.suppress(BadRequest):
                self._read_body()  # keep the connection usable
            status = 405 if route in ("/health", "/models") else 404
            self._error(status, f"no such endpoint: POST {self.path}")
            return
        t_request = time.time()
        try:
            body = self._read_body()
            req = parse_request(body)
        except BadRequest as exc:
            self.close_connection = exc.status in (411, 413)
            self._error(exc.status, exc.message)
            return
        try:
            self._chat(req, body, t_request)
        except PolicyError as exc:
            self._error(500, f"deletion policy failed: {exc}", "server_error")
        except OSError as exc:  # the call log could not be written (disk full, …): the run must stop
            if not isinstance(exc, ConnectionError):
                self._error(500, f"the proxy could not write its call log: {exc}", "server_error")

    def _chat(self, req: dict[str, Any], body: bytes, t_request: float) -> None:
        s = self.server
        reduction = s.reducer.reduce(req["messages"])
        stream = req.get("stream") is True
        if reduction.changed or stream:
            out = dict(req)
            out["messages"] = reduction.messages
            if stream:
                out.pop("stream", None)
                out.pop("stream_options", None)
            body = dumps(out)
        reply = s.upstream.request("POST", "/chat/completions", body, self._upstream_headers())
        t_response = time.time()
        params = {k: v for k, v in req.items() if k not in ("messages", "tools")}
        common = {
            "messages": reduction.messages,
            "tools": req.get("tools"),
            "params": params,
            "deleted": reduction.deleted,
            "t_request": t_request,
            "t_response": t_response,
            "attempts": reply.attempts,
        }
        data: Any = None
        problem = reply.error
        if reply.ok:
            try:
                data = loads(reply.body)
                response, usage = summarize_response(data)
            except (ValueError, AttributeError, TypeError) as exc:
                problem = f"upstream reply is not a chat completion: {exc}"
        if problem is not None or not reply.ok:
            status = reply.status if not reply.ok else 502
            message = problem or f"upstream returned HTTP {reply.status}"
            s.log.append_call(**common, response=None, usage=None, status=status, error=message)
            s.count(False)
            self._send(status, upstream_error_body(status, b"" if reply.ok else reply.body, message))
            return
        s.log.append_call(**common, response=response, usage=usage, status=200)
        s.count(True)
        if stream:
            include_usage = bool((req.get("stream_options") or {}).get("include_usage"))
            self._send(200, sse_stream(data, include_usage), "text/event-stream")
        else:
            self._send(200, reply.body, reply.headers.get("content-type", "application/json"))


class ProxyHandle:
    """A running proxy: ``.url`` (the OpenAI base URL, ending in ``/v1``), ``.stop()``."""

    def __init__(self, server: ProxyServer, thread: threading.Thread, log_path: Path) -> None:
        self.server = server
        self.thread = thread
        self.log_path = log_path
        host, port = server.server_address[:2]
        self.host, self.port = str(host), int(port)
        shown = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"http://{shown}:{self.port}/v1"
        self._stopped = False

    @property
    def calls(self) -> int:
        return self.server.calls_ok

    def stop(self) -> None:
        """Stop serving, close the upstream connections and the call log. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)
        self.server.upstream.close()
        self.server.log.close()

    def __enter__(self) -> ProxyHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _check_resumed_log(path: Path, header: Mapping[str, Any]) -> None:
    """Appending to an existing log is only right for the same run, configuration and seed."""
    if not path.exists() or path.stat().st_size == 0:
        return
    old = read_call_log(path, allow_torn=True).header
    for key in ("run_id", "seed"):
        if old.get(key) != header[key]:
            raise UserError(f"{path}: this call log belongs to {key} {old.get(key)!r}, not {header[key]!r}; "
                            "give another --log directory")
    if "actions" in old and old["actions"] != header["actions"]:
        raise UserError(f"{path}: this call log was written with another action pattern "
                        f"({old['actions']!r}, not {header['actions']!r}); give another --log directory")
    if (old.get("deletion") or {}).get("name") != header["deletion"]["name"]:
        raise UserError(f"{path}: this call log belongs to configuration {old['deletion'].get('name')!r}, "
                        f"not {header['deletion']['name']!r}; give another --log directory")


def start_proxy(
    upstream: str,
    deletion: Deletion,
    seed: int,
    log_dir: str | Path,
    run_id: str,
    *,
    actions: ActionSyntax | None,
    host: str = "127.0.0.1",
    port: int = 0,
    settings: ProxySettings | None = None,
    access: Access | None = None,
) -> ProxyHandle:
    """Start a proxy for one run in a background thread; its call log is ``log_dir/calls.jsonl``.

    ``actions``: how the run's agent writes actions into its reply text (the agent's own
    pattern, :func:`forgetting.agents.action_syntax`; None for tool calls) — the
    deletion engine never touches them; the call log's header records it.
    ``port=0`` picks a free port (see ``.url``). Appending to an existing log of the same run
    resumes it (a torn last line is cut off first). ``access``: the API key to send upstream
    (never logged) and the limits the runs of a batch share (:mod:`forgetting.proxy.upstream`)."""
    settings = settings or ProxySettings.from_config()
    up = Upstream(upstream, **settings.upstream_options(), access=access, jitter_seed=int(seed))
    log_path = Path(log_dir) / FILENAME
    header = {
        "run_id": run_id,
        "seed": int(seed),
        "deletion": deletion.as_dict(),
        "tokenizer": tokenizer.TOKENIZER_NAME,
        "chat_format": chat_format.FORMAT_NAME,
        "upstream": up.url,
        "settings": settings.as_dict(),
        "actions": actions.to_json() if actions is not None else None,
    }
    _check_resumed_log(log_path, header)
    reducer = Reducer(deletion, seed, actions=actions, settings=settings.deletion)
    log = CallLogWriter(log_path, header, fsync=settings.fsync)
    try:
        server = ProxyServer(
            (host, port), upstream=up, reducer=reducer, log=log, run_id=run_id, seed=int(seed),
            settings=settings,
        )
    except OSError as exc:
        log.close()
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    if host not in _LOOPBACK:
        print(f"warning: the proxy listens on {host}, reachable from other machines", file=sys.stderr)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                              name=f"forgetting-proxy-{run_id}", daemon=True)
    thread.start()
    return ProxyHandle(server, thread, log_path)
