"""The deletion proxy: an OpenAI-compatible HTTP server between an agent and its model.

``POST /v1/chat/completions``
    the request's ``messages`` are reduced by the run's deletion configuration (one
    :class:`~forgetting.deletion.Reducer` per proxy, so one proxy serves one run) and the
    request goes upstream otherwise unchanged (model, tools, temperature, max_tokens, …;
    a request nothing was deleted from is forwarded byte for byte). Upstream it carries
    ``X-Forgetting-Run: <run id>`` and ``X-Forgetting-Seed: <seed>`` besides the client's
    ``Authorization``. Every call is appended to the call log (``calls.jsonl``) *before* the
    reply goes back, so whatever the agent saw is on disk. Upstream failures are retried
    (:mod:`forgetting.run.proxy.upstream`), then returned as an OpenAI-style error with the
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
import re
import socket
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from forgetting.deletion import Reducer
from forgetting.deletion.policy import PolicyError
from forgetting.foundation.errors import UserError
from forgetting.grid import Deletion
from forgetting.prompt import chat_format, tokenizer
from forgetting.prompt.messages import ActionSyntax
from forgetting.prompt.served_format import Counting, TemplateError
from forgetting.records.calllog import FILENAME, CallLogWriter, read_call_log
from forgetting.run.proxy.openai_api import (
    BadRequest,
    dumps,
    error_body,
    parse_reply,
    parse_request,
    redact,
    sse_stream,
    summarize_response,
    upstream_error_body,
)
from forgetting.run.proxy.upstream import Access, Upstream
from forgetting.study.proxy import ProxySettings

RUN_HEADER = "X-Forgetting-Run"
SEED_HEADER = "X-Forgetting-Seed"
_FORWARDED_HEADERS = ("Authorization", "OpenAI-Organization", "OpenAI-Project")
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_DIGITS = re.compile(r"[0-9]{1,20}")
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")
_MAX_LINE = 4096  # a chunk-size or trailer line
_MAX_TRAILERS = 64
#: what a run id may hold: it travels in a header (X-Forgetting-Run) and names files
_RUN_ID = re.compile(r"[\x21-\x7e]{1,512}")


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
        log: CallLogWriter | None,
        run_id: str,
        seed: int,
        settings: ProxySettings,
    ) -> None:
        super().__init__(address, ProxyHandler)
        self.upstream = upstream
        self.reducer = reducer
        self.log: CallLogWriter = log  # type: ignore[assignment]  # set by start_proxy once listening
        self.run_id = run_id
        self.seed = seed
        self.settings = settings
        self.calls_ok = 0
        self.calls_failed = 0
        #: the messages of the last request that passed parse_request (its checked prefix)
        self.checked_messages: list[Any] | None = None
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
        # a connection idle this long (no request, or a request stalled mid-way) is closed,
        # and its thread released; waiting for the upstream's reply is not idling
        self.timeout = self.server.settings.idle_timeout_s
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

    def _read_exactly(self, n: int) -> bytes:
        data = self.rfile.read(n)
        if len(data) != n:
            raise BadRequest(400, f"the request body ended after {len(data)} of {n} bytes")
        return data

    def _read_body(self) -> bytes:
        """The request body (``Content-Length`` or chunked), at most ``max_request_bytes``;
        BadRequest (the connection is then closed) for a malformed or oversized one. A
        client that stalls is cut off by the connection's idle timeout."""
        limit = self.server.settings.max_request_bytes
        too_large = BadRequest(413, f"request body is larger than {limit} bytes")
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks, total = [], 0
            while True:
                line = self.rfile.readline(_MAX_LINE + 1)
                size_text = line.split(b";")[0].strip()
                if len(line) > _MAX_LINE or not _HEX.fullmatch(size_text):
                    raise BadRequest(400, f"bad chunk size line {line[:40]!r}")
                size = int(size_text, 16)
                if size == 0:
                    for _ in range(_MAX_TRAILERS):
                        if self.rfile.readline(_MAX_LINE + 1) in (b"\r\n", b"\n", b""):
                            break
                    else:
                        raise BadRequest(400, f"more than {_MAX_TRAILERS} trailer lines")
                    break
                total += size
                if total > limit:
                    raise too_large
                chunks.append(self._read_exactly(size))
                if self.rfile.readline(_MAX_LINE + 1) not in (b"\r\n", b"\n"):
                    raise BadRequest(400, "a chunk does not end with CRLF")
            return b"".join(chunks)
        length = self.headers.get("Content-Length")
        if length is None:
            raise BadRequest(411, "a request body needs a Content-Length header")
        if not _DIGITS.fullmatch(length.strip()):  # no sign, no "1_000": a byte count
            raise BadRequest(400, f"bad Content-Length {length!r}: expected a byte count")
        n = int(length)
        if n > limit:
            raise too_large
        return self._read_exactly(n)

    def _linger(self) -> None:
        """Before closing a connection whose request was not read whole: send the reply off
        and read (briefly, boundedly) what the client is still sending, so that closing with
        unread data does not reset the connection and lose the reply on the way."""
        with contextlib.suppress(OSError):
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_WR)
            self.connection.settimeout(0.5)
            for _ in range(64):
                if not self.connection.recv(65536):
                    break

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
            try:
                self._read_body()  # keep the connection usable
            except BadRequest:
                self.close_connection = True
            status = 405 if route in ("/health", "/models") else 404
            self._error(status, f"no such endpoint: POST {self.path}")
            return
        t_request = time.time()
        try:
            body = self._read_body()
        except BadRequest as exc:
            self.close_connection = True  # the rest of the stream cannot be trusted to be a request
            self._error(exc.status, exc.message)
            self._linger()
            return
        try:
            req = parse_request(body, self.server.checked_messages)
        except BadRequest as exc:
            self._error(exc.status, exc.message)
            return
        self.server.checked_messages = req["messages"]
        try:
            self._chat(req, body, t_request)
        except PolicyError as exc:
            self._error(500, f"deletion policy failed: {exc}", "server_error")
        except TemplateError as exc:  # the served model's template refuses it: so would the server
            self._error(400, str(exc))
        except OSError as exc:  # the call log could not be written (disk full, …): the run must stop
            if not isinstance(exc, ConnectionError | TimeoutError):
                self._error(500, f"the proxy could not write its call log: {exc}", "server_error")

    def _chat(self, req: dict[str, Any], body: bytes, t_request: float) -> None:
        """Serve one chat completion: everything that can fail on the request — the deletion,
        the call log's records of its prompt — is done before it is forwarded; after that the
        call is logged (a reply that is no chat completion as a failed call) and answered."""
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
        tools = req.get("tools")
        prompt = s.log.prepare(reduction.messages, tools)
        params = redact({k: v for k, v in req.items() if k not in ("messages", "tools")})
        reply = s.upstream.request("POST", "/chat/completions", body, self._upstream_headers())
        # -- forwarded: from here on the call is logged and answered, whatever the reply --
        t_response = time.time()
        common = {
            "prompt": prompt,
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
                data = parse_reply(reply.body)
                response, usage = summarize_response(data)
            except (ValueError, UnicodeDecodeError) as exc:
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
            stream_options = req.get("stream_options") or {}
            self._send(200, sse_stream(data, stream_options.get("include_usage") is True), "text/event-stream")
        else:
            self._send(200, reply.body, reply.headers.get("content-type", "application/json"))


#: the most seconds :meth:`ProxyHandle.stop` takes
STOP_TIMEOUT_S = 5.0


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

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> bool:
        """Stop serving, close the upstream connections and the call log; idempotent. Bounded
        by design: whatever blocks (a server thread that never acknowledges, a handler stuck
        in a write holding the call log), it returns within ``timeout_s`` — True when every
        step finished. Giving up loses nothing: each call is on disk before it is answered,
        and a request still in flight was never answered (its agent sends it again)."""
        if self._stopped:
            return True
        self._stopped = True

        def steps() -> None:
            self.server.shutdown()
            self.server.server_close()
            self.thread.join()
            self.server.upstream.close()
            self.server.log.close()

        stopper = threading.Thread(target=steps, name="forgetting-proxy-stop", daemon=True)
        stopper.start()
        stopper.join(timeout_s)
        return not stopper.is_alive()

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
    deletion = old.get("deletion")
    name = deletion.get("name") if isinstance(deletion, Mapping) else deletion
    if name != header["deletion"]["name"]:
        raise UserError(f"{path}: this call log belongs to configuration {name!r}, "
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
    settings: ProxySettings,
    access: Access | None = None,
    counting: Counting | None = None,
    server_info: Mapping[str, Any] | None = None,
) -> ProxyHandle:
    """Start a proxy for one run in a background thread; its call log is ``log_dir/calls.jsonl``.

    ``actions``: how the run's agent writes actions into its reply text (the agent's own
    pattern, :func:`forgetting.agents.action_syntax`; None for tool calls) — the
    deletion engine never touches them; the call log's header records it.
    ``port=0`` picks a free port (see ``.url``). Appending to an existing log of the same run
    resumes it (a torn last line is cut off first). ``access``: the API key to send upstream
    (never logged) and the limits the runs of a batch share (:mod:`forgetting.run.proxy.upstream`).
    ``counting``: how the call log counts the prompts (default: Qwen3-Coder's format with
    Qwen's BPE, named an approximation in the header); ``server_info``: what the model server
    said of its prefix cache (:func:`forgetting.run.model_server.cache_info`), recorded in the
    header for the cost stage. ``settings``: the study's (``study.proxy``)."""
    counting = counting or Counting()
    if not _RUN_ID.fullmatch(run_id):
        raise UserError(
            f"--run-id {run_id!r}: expected 1–512 printable ASCII characters without spaces "
            "(it travels in the X-Forgetting-Run header)"
        )
    up = Upstream(upstream, **settings.upstream_options(), access=access, jitter_seed=int(seed))
    log_path = Path(log_dir) / FILENAME
    header: dict[str, Any] = {
        "run_id": run_id,
        "seed": int(seed),
        "deletion": deletion.as_dict(),
        "tokenizer": tokenizer.TOKENIZER_NAME,
        "chat_format": chat_format.FORMAT_NAME,
        "upstream": up.url,
        "settings": settings.as_dict(),
        "actions": actions.to_json() if actions is not None else None,
        "prompt_count": counting.header(),
    }
    if counting.served is not None:
        header["tokenizer"] = counting.served.tokenizer_name
        header["chat_format"] = counting.served.name
    if server_info:
        header["server"] = dict(server_info)
    _check_resumed_log(log_path, header)
    reducer = Reducer(deletion, seed, actions=actions, settings=settings.deletion)
    try:  # listen first: a proxy that cannot start leaves no call log behind
        server = ProxyServer(
            (host, port), upstream=up, reducer=reducer, log=None, run_id=run_id, seed=int(seed),
            settings=settings,
        )
    except OSError as exc:
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    except OverflowError:  # a port beyond 65535
        raise UserError(f"cannot listen on {host}:{port}: not a port") from None
    try:
        server.log = CallLogWriter(log_path, header, fsync=settings.fsync, served=counting.served)
    except BaseException:
        server.server_close()
        raise
    if host not in _LOOPBACK:
        print(f"warning: the proxy listens on {host}, reachable from other machines", file=sys.stderr)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                              name=f"forgetting-proxy-{run_id}", daemon=True)
    thread.start()
    return ProxyHandle(server, thread, log_path)
