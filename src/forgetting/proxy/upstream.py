"""The upstream OpenAI-compatible server, as the proxy calls it: keep-alive connections
(one per proxy thread), retries with exponential backoff where a retry is safe.

Chat completions have no side effects, so a retry is always safe for correctness; the
proxy retries what is likely transient — connection failures (refused, reset, closed), 429,
502, 503 and 504, honouring ``Retry-After`` up to the backoff cap — and not a read timeout
(the server is busy generating; a retry would double its load) nor any other status.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from forgetting.errors import UserError

RETRY_STATUSES = frozenset({429, 502, 503, 504})
_CONNECTION_ERRORS = (ConnectionError, http.client.HTTPException, socket.gaierror, BrokenPipeError)


@dataclass
class Reply:
    status: int  # the upstream's status; 502 / 504 when it never answered
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    attempts: int = 1
    error: str | None = None  # set when no HTTP reply came back
    stale: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None and 200 <= self.status < 300


def base_url(url: str) -> tuple[str, str, int, str]:
    """``http[s]://host[:port][/path]`` → (scheme, host, port, API base path ending in ``/v1``)."""
    expected = "expected an http(s) URL such as http://127.0.0.1:8000/v1"
    try:
        parts = urlsplit(url)
        port = parts.port  # a port out of range or not a number raises here
    except ValueError as exc:  # also a malformed IPv6 address
        raise UserError(f"--upstream {url!r}: {exc}; {expected}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"--upstream {url!r}: {expected}")
    if not url.isascii() or any(c.isspace() or not c.isprintable() for c in url):
        raise UserError(f"--upstream {url!r}: holds a space, a control or a non-ASCII character; {expected}")
    path = parts.path.rstrip("/")
    if not path.endswith("/v1"):
        path += "/v1"
    port = port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, parts.hostname, port, path


class Upstream:
    def __init__(
        self,
        url: str,
        *,
        retries: int = 4,
        backoff_s: float = 0.5,
        backoff_max_s: float = 8.0,
        timeout_s: float = 900.0,
        connect_timeout_s: float = 10.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.scheme, self.host, self.port, self.path = base_url(url)
        self.url = f"{self.scheme}://{self.host}:{self.port}{self.path}"
        # the retry policy: attempts after the first, and the waits between them
        self.retries, self.backoff_s, self.backoff_max_s = retries, backoff_s, backoff_max_s
        self.timeout_s, self.connect_timeout_s = timeout_s, connect_timeout_s  # per attempt, per connection
        self._sleep = sleep
        self._local = threading.local()
        self._all: list[http.client.HTTPConnection] = []
        self._all_lock = threading.Lock()

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            return conn, True
        cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        conn = cls(self.host, self.port, timeout=self.connect_timeout_s)
        conn.connect()
        conn.sock.settimeout(self.timeout_s)
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._local.conn = conn
        with self._all_lock:
            self._all.append(conn)
        return conn, False

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def _once(self, method: str, path: str, body: bytes | None, headers: Mapping[str, str]) -> Reply:
        """One attempt. ``Reply.stale``: it failed on a reused keep-alive connection (which the
        server may have closed while idle), so a retry need not wait."""
        try:
            conn, reused = self._connection()
        except (OSError, *_CONNECTION_ERRORS) as exc:
            return Reply(502, b"", error=f"upstream {self.url} unreachable: {exc}")
        try:
            conn.request(method, self.path + path, body=body, headers=dict(headers))
            resp = conn.getresponse()
            data = resp.read()
            reply_headers = {k.lower(): v for k, v in resp.getheaders()}
            if resp.will_close:
                self._drop()
            return Reply(resp.status, data, reply_headers)
        except TimeoutError:
            self._drop()
            message = f"upstream {self.url} did not answer within {self.timeout_s:g} s"
            return Reply(504, b"", error=message)
        except (OSError, *_CONNECTION_ERRORS) as exc:
            self._drop()
            message = f"upstream {self.url} failed: {type(exc).__name__}: {exc}"
            return Reply(502, b"", error=message, stale=reused)

    def _wait(self, attempt: int, reply: Reply) -> float:
        wait = min(self.backoff_max_s, self.backoff_s * 2 ** (attempt - 1))
        retry_after = reply.headers.get("retry-after")
        if retry_after:
            with contextlib.suppress(ValueError):
                wait = min(self.backoff_max_s, max(wait, float(retry_after)))
        return wait

    def request(
        self, method: str, path: str, body: bytes | None = None, headers: Mapping[str, str] | None = None
    ) -> Reply:
        """Send ``method path`` (relative to the API base), retrying what is retryable."""
        headers = headers or {}
        attempt = 0
        while True:
            attempt += 1
            reply = self._once(method, path, body, headers)
            reply.attempts = attempt
            retryable = reply.status in RETRY_STATUSES and not (reply.error and reply.status == 504)
            if not retryable or attempt > self.retries:
                return reply
            if not reply.stale:
                self._sleep(self._wait(attempt, reply))

    def close(self) -> None:
        """Close every thread's connection."""
        with self._all_lock:
            for conn in self._all:
                conn.close()
            self._all.clear()
