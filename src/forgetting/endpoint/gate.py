"""The key-checking front of ``forgetting serve`` (route C): nothing of the server answers
without the key.

vLLM's ``--api-key`` (or ``VLLM_API_KEY``) guards only the paths that start with ``/v1``: its
authentication middleware passes every other path and every ``OPTIONS`` request through
unchecked (vllm/entrypoints/openai/api_server.py, ``build_app``: ``if not
url_path.startswith("/v1"): return await call_next(request)``), so ``/invocations`` (the
SageMaker-style generation route), ``/tokenize``, ``/detokenize``, ``/pooling``, ``/score``,
``/metrics``, ``/health`` and ``/version`` answer anyone who reaches the port. So with a key,
``forgetting serve`` binds vLLM to loopback on a port of its own and listens on the public
address with this front, which answers a request only when it carries
``Authorization: Bearer KEY`` (compared in constant time) — any method, any path — and
forwards it, unchanged, to vLLM, streaming the reply back as it comes (server-sent events of a
streamed completion included). Every other request gets 401 and never reaches vLLM.
"""

from __future__ import annotations

import hmac
import http.client
import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: headers that belong to one hop (RFC 9110 §7.6.1), not forwarded either way
HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
              "transfer-encoding", "upgrade"}
#: how long a forwarded request may wait for vLLM (a long completion streams well within it)
UPSTREAM_TIMEOUT_S = 3600.0


class _Gate(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: GateServer

    def _refuse(self) -> None:
        body = json.dumps({"error": "Unauthorized"}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("WWW-Authenticate", "Bearer")
        self.end_headers()
        self.wfile.write(body)

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        given = self.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), self.server.expected):
            self._refuse()
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP and k.lower() != "host"}
        upstream = http.client.HTTPConnection("127.0.0.1", self.server.upstream_port, timeout=UPSTREAM_TIMEOUT_S)
        try:
            upstream.request(self.command, self.path, body=body or None, headers=headers)
            reply = upstream.getresponse()
            self.send_response(reply.status, reply.reason)
            for k, v in reply.getheaders():
                if k.lower() not in HOP_BY_HOP and k.lower() not in ("content-length", "date", "server"):
                    self.send_header(k, v)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if self.command == "HEAD":
                return
            while chunk := reply.read1(65536):
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except (OSError, http.client.HTTPException):
            self.close_connection = True
        finally:
            upstream.close()

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = _handle

    def log_message(self, *args: object) -> None:  # the server's own log has the requests
        pass


class GateServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], *, key: str, upstream_port: int) -> None:
        super().__init__(address, _Gate)
        self.expected = f"Bearer {key}".encode()
        self.upstream_port = upstream_port


@contextmanager
def gate(host: str, port: int, *, key: str, upstream_port: int) -> Iterator[GateServer]:
    """The front on ``host:port`` (0: any free port) for vLLM on ``127.0.0.1:upstream_port``,
    serving in a thread until the block ends."""
    server = GateServer((host, port), key=key, upstream_port=upstream_port)
    thread = threading.Thread(target=server.serve_forever, name="forgetting-serve-gate", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
