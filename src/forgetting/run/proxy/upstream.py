"""The upstream OpenAI-compatible server, as the proxy calls it: keep-alive connections
(one per proxy thread), retries where a retry is safe, the API key, and the limits the runs
of a batch share in front of one endpoint.

Retries. Chat completions have no side effects, so a retry is always safe for correctness;
the proxy retries what is likely transient — connection failures (refused, reset, closed),
429, 502, 503 and 504 — and not a read timeout (the server is busy generating; a retry
would double its load) nor any other status. The wait before retry *n* is the backoff
``min(backoff_max_s, backoff_s · 2^(n−1))`` shortened by a deterministic jitter — times
``1 − jitter · u`` with ``u`` in [0, 1) drawn from the run's seed, the request's number and
the attempt (:func:`forgetting.foundation.seeds.unit`), so the runs of a batch do not retry in step and
a rerun waits the same — or, when the reply carries ``Retry-After`` (seconds, or an HTTP
date), at least that long, even beyond ``backoff_max_s``: the server said when to come back.
Every request's waits together stay within ``max_wait_s``: a wait that would pass it is not
made, and the request fails at once with the last reply. A failure on a reused keep-alive
connection (the server may have closed it while idle) is retried without a wait.

The API key (:class:`Access`) goes upstream as ``Authorization: Bearer …`` in place of the
client's; it is never logged, and every occurrence of it in what comes back (a provider that
echoes a wrong key in its error message) is replaced by ``[redacted]`` before the proxy
sees the reply — in every spelling it may come back in: JSON-escaped, URL-encoded, base64
(:mod:`forgetting.run.proxy.key_spellings`). :attr:`Upstream.failure` says, in one line
naming the upstream's URL and what to do, why the last request failed when the upstream (not
the request) was at fault; a later successful request clears it.

Bounds. One attempt's whole reply — headers and body — must arrive within ``timeout_s`` (a
deadline: a server that drips a byte at a time is cut off there, not after each read), and
its body may hold at most :data:`MAX_REPLY_BYTES` (as the proxy's requests are capped): a
larger one is a failed call (502), the connection dropped unread.
"""

from __future__ import annotations

import contextlib
import datetime
import email.utils
import http.client
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from forgetting.foundation.errors import UserError
from forgetting.foundation.seeds import unit
from forgetting.run.proxy.deadlines import DEADLINES
from forgetting.run.proxy.key_spellings import redact, redact_text, spellings

if TYPE_CHECKING:
    from forgetting.run.proxy.shared_limits import SharedLimits

RETRY_STATUSES = frozenset({429, 502, 503, 504})
#: the largest reply body read from the upstream, as requests are capped (a chat completion is
#: kilobytes; a server that sends without end is cut off there)
MAX_REPLY_BYTES = 64 * 1024 * 1024
_READ_SIZE = 1 << 16
_CONNECTION_ERRORS = (ConnectionError, http.client.HTTPException, socket.gaierror, BrokenPipeError)
#: what replaces the API key wherever a reply repeats it
REDACTED = "[redacted]"


class ReplyTooLarge(Exception):
    """A reply body beyond :data:`MAX_REPLY_BYTES`."""


@dataclass
class Reply:
    status: int  # the upstream's status; 502 / 504 when it never answered
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    attempts: int = 1
    error: str | None = None  # set when no usable HTTP reply came back
    stale: bool = False
    #: worth another attempt: a connection failure, or HTTP 429, 502, 503, 504 (not a read
    #: timeout, nor a reply that is no JSON)
    retryable: bool = False
    #: seconds spent waiting between the attempts
    waited_s: float = 0.0
    #: set when the retries stopped before ``retries`` was used up (the wait budget)
    gave_up: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and 200 <= self.status < 300


@dataclass(frozen=True)
class Access:
    """How to reach the upstream besides its URL: the API key (never logged, never in a
    ``repr``), the name of the environment variable it came from (for messages), and the
    limits the runs of a batch share (None: none)."""

    api_key: str | None = field(default=None, repr=False)
    key_name: str | None = None
    shared: SharedLimits | None = None
    #: what the upstream is called in messages
    label: str = "model server"


def _shown(url: str) -> str:
    """``url`` as a message shows it: credentials before an ``@`` replaced by ``…``."""
    return re.sub(r"^([^:/?#]*:)?//[^/?#]*@", lambda m: f"{m.group(1) or ''}//…@", url)


def base_url(url: str) -> tuple[str, str, int, str]:
    """``http[s]://host[:port][/path]`` → (scheme, host, port, API base path ending in ``/v1``)."""
    expected = "expected an http(s) URL such as http://127.0.0.1:8000/v1"
    try:
        parts = urlsplit(url)
        port = parts.port  # a port out of range or not a number raises here
    except ValueError as exc:  # also a malformed IPv6 address
        raise UserError(f"--upstream {_shown(url)!r}: {exc}; {expected}") from None
    if "@" in parts.netloc:  # http.client would drop them: the server would see no credentials
        raise UserError(f"--upstream {_shown(url)!r}: the URL holds credentials; give the key in an environment "
                        "variable (--api-key-env, model.endpoint.api_key_env)")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"--upstream {_shown(url)!r}: {expected}")
    if not url.isascii() or any(c.isspace() or not c.isprintable() for c in url):
        raise UserError(f"--upstream {_shown(url)!r}: holds a space, a control or a non-ASCII character; {expected}")
    path = parts.path.rstrip("/")
    if not path.endswith("/v1"):
        path += "/v1"
    port = port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, parts.hostname, port, path


def retry_after_s(value: str | None, now: float) -> float | None:
    """A ``Retry-After`` header in seconds from ``now`` (unix time): a number of seconds, or
    an HTTP date (RFC 9110; a date in the past is 0); None when absent or unreadable."""
    if value is None:
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # an HTTP date is GMT
            when = when.replace(tzinfo=datetime.UTC)
        return max(0.0, when.timestamp() - now)
    if seconds != seconds or seconds in (float("inf"), float("-inf")):  # NaN, inf
        return None
    return max(0.0, seconds)


def _short(body: bytes) -> str:
    """The gist of an error body: its OpenAI-style ``error.message``, else its first text."""
    text = body.decode("utf-8", errors="replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            text = err["message"]
        elif isinstance(err, str):
            text = err
        elif isinstance(data.get("message"), str):
            text = data["message"]
    text = " ".join(text.split())
    return text[:200] + ("…" if len(text) > 200 else "")


def describe_failure(reply: Reply, url: str, *, key_name: str | None = None, what: str = "model server") -> str:
    """One line: which server failed (its URL, never the key), how, and what to do."""
    where = f"{what} {url}"
    tries = f" after {reply.attempts} attempt{'s' if reply.attempts != 1 else ''}"
    if reply.waited_s:
        tries += f" over {reply.waited_s:.1f} s" if reply.waited_s < 10 else f" over {reply.waited_s:.0f} s"
    stop = f" ({reply.gave_up})" if reply.gave_up else ""
    if reply.error is not None and not reply.body:
        if "did not answer within" in reply.error:
            return (f"{reply.error}; a generation that long needs a larger execution.proxy.timeout_s, "
                    "else the server is stuck")
        return f"{reply.error}{tries}{stop}; check that the server runs and that its address is right"
    if reply.error is not None:  # a reply that came back but is no JSON
        return f"{reply.error}; is the base URL the server's OpenAI API root (…/v1)?"
    gist = _short(reply.body).rstrip(".")
    said = f": {gist}" if gist else ""
    if reply.status in (401, 403):
        key = f"the API key in ${key_name}" if key_name else "no API key (model.endpoint.api_key_env is not set)"
        return f"{where} refused {key} (HTTP {reply.status}{said}); check the key and that it may use this model"
    if reply.status == 404:
        return (f"{where} answered HTTP 404{said}; check the base URL (the API root, …/v1) and "
                "model.served_name (the name the server lists under GET /v1/models)")
    if reply.status == 429:
        return (f"{where} kept answering HTTP 429 (rate limited){tries}{stop}{said}; lower "
                "model.endpoint.max_concurrent_requests or execution.concurrency, or raise execution.proxy.max_wait_s")
    if reply.status >= 500:
        return f"{where} answered HTTP {reply.status}{tries}{stop}{said}; the server is failing: retry later"
    return f"{where} answered HTTP {reply.status}{said}"


#: statuses that are the upstream's fault (or its operator's), not the request's: a run that
#: ends on one is an infrastructure failure, redone later, never a result
UPSTREAM_FAULTS = frozenset({401, 403, 404, 407, 408, 429}) | frozenset(range(500, 600))


class Upstream:
    def __init__(
        self,
        url: str,
        *,
        retries: int = 4,
        backoff_s: float = 0.5,
        backoff_max_s: float = 8.0,
        jitter: float = 0.0,
        max_wait_s: float = float("inf"),
        timeout_s: float = 900.0,
        connect_timeout_s: float = 10.0,
        access: Access | None = None,
        jitter_seed: int | str = 0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.scheme, self.host, self.port, self.path = base_url(url)
        self.url = f"{self.scheme}://{self.host}:{self.port}{self.path}"
        # the retry policy: attempts after the first, the waits between them and their bounds
        self.retries, self.backoff_s, self.backoff_max_s = retries, backoff_s, backoff_max_s
        self.jitter, self.max_wait_s, self.jitter_seed = jitter, max_wait_s, jitter_seed
        # the deadline of one attempt's whole reply; of opening one connection
        self.timeout_s, self.connect_timeout_s = timeout_s, connect_timeout_s
        self.max_reply_bytes = MAX_REPLY_BYTES
        self.access = access or Access()
        self._key = self.access.api_key.encode() if self.access.api_key else None
        #: the key in every spelling a reply may repeat it in (longest first)
        self._spellings = spellings(self.access.api_key) if self.access.api_key else []
        self._sleep = sleep
        self._clock = clock
        self._local = threading.local()
        self._all: list[http.client.HTTPConnection] = []
        self._all_lock = threading.Lock()
        self._requests = 0
        #: why the last request failed, when the upstream was at fault (None after a success)
        self.failure: str | None = None

    # -- connections ---------------------------------------------------------------------
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

    def _headers(self, headers: Mapping[str, str]) -> dict[str, str]:
        out = dict(headers)
        if self._key is not None:
            for name in [k for k in out if k.lower() == "authorization"]:
                del out[name]
            out["Authorization"] = f"Bearer {self.access.api_key}"
        return out

    def _redact(self, reply: Reply) -> Reply:
        """Every occurrence of the API key in what came back, in any of its spellings, replaced
        (body, headers, message)."""
        forms = self._spellings
        if not forms:
            return reply
        reply.body = redact(reply.body, forms, REDACTED.encode())
        if reply.error:
            reply.error = redact_text(reply.error, forms, REDACTED)
        reply.headers = {k: redact_text(v, forms, REDACTED) for k, v in reply.headers.items()}
        return reply

    def _once(self, method: str, path: str, body: bytes | None, headers: Mapping[str, str]) -> Reply:
        """One attempt. ``Reply.stale``: it failed on a reused keep-alive connection (which the
        server may have closed while idle), so a retry need not wait."""
        try:
            conn, reused = self._connection()
        except (OSError, *_CONNECTION_ERRORS) as exc:
            return Reply(502, b"", error=f"{self.access.label} {self.url} unreachable: {exc}", retryable=True)
        # the attempt's deadline: the whole reply, headers and body, within timeout_s — a socket
        # timeout alone bounds each read, and a server that drips a byte at a time never ends
        sock = conn.sock

        def at_deadline() -> None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # the blocked read returns at once

        deadline = DEADLINES.arm(self.timeout_s, at_deadline)
        try:
            conn.request(method, self.path + path, body=body, headers=headers)
            resp = conn.getresponse()
            data = self._read_capped(resp)
            if deadline.fired:
                raise TimeoutError
            reply_headers = {k.lower(): v for k, v in resp.getheaders()}
            if resp.will_close:
                self._drop()
            reply = Reply(resp.status, data, reply_headers, retryable=resp.status in RETRY_STATUSES)
            if 200 <= reply.status < 300 and not _looks_like_json(reply):
                kind = reply_headers.get("content-type") or "no content type"
                message = f"{self.access.label} {self.url} answered HTTP {reply.status} with {kind}, not JSON"
                return Reply(502, data, reply_headers, error=message)
            return reply
        except ReplyTooLarge as exc:
            self._drop()
            return Reply(502, b"", error=f"{self.access.label} {self.url} answered {exc}; the reply is not read")
        except (TimeoutError, OSError, *_CONNECTION_ERRORS) as exc:
            self._drop()
            if deadline.fired or isinstance(exc, TimeoutError):
                message = f"{self.access.label} {self.url} did not answer within {self.timeout_s:g} s"
                return Reply(504, b"", error=message)
            message = f"{self.access.label} {self.url} failed: {type(exc).__name__}: {exc}"
            return Reply(502, b"", error=message, stale=reused, retryable=True)
        finally:
            DEADLINES.disarm(deadline)

    def _read_capped(self, resp: http.client.HTTPResponse) -> bytes:
        """The reply's body, at most :attr:`max_reply_bytes` (a declared or an actual body beyond
        it is :class:`ReplyTooLarge`, and the connection is dropped unread)."""
        limit = self.max_reply_bytes
        declared = resp.getheader("content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > limit:
            raise ReplyTooLarge(f"a body of {int(declared)} bytes, more than the {limit} accepted")
        chunks, total = [], 0
        while True:
            chunk = resp.read(_READ_SIZE)
            if not chunk:
                return b"".join(chunks)
            total += len(chunk)
            if total > limit:
                raise ReplyTooLarge(f"more than the {limit} bytes accepted")
            chunks.append(chunk)

    # -- the retry policy ----------------------------------------------------------------
    def backoff(self, attempt: int, request_no: int) -> float:
        """The wait after failed attempt ``attempt`` (1-based) of request ``request_no``
        without ``Retry-After``: the capped exponential backoff, shortened by the jitter."""
        wait = min(self.backoff_max_s, self.backoff_s * 2 ** (attempt - 1))
        if self.jitter:
            wait *= 1.0 - self.jitter * unit("retry-jitter", self.jitter_seed, request_no, attempt)
        return wait

    def _wait(self, attempt: int, reply: Reply, request_no: int) -> float:
        wait = self.backoff(attempt, request_no)
        asked = retry_after_s(reply.headers.get("retry-after"), self._clock())
        return max(wait, asked) if asked is not None else wait

    @contextlib.contextmanager
    def _slot(self) -> Iterator[None]:
        shared = self.access.shared
        if shared is None:
            yield
            return
        with shared.slot():
            yield

    def request(
        self, method: str, path: str, body: bytes | None = None, headers: Mapping[str, str] | None = None
    ) -> Reply:
        """Send ``method path`` (relative to the API base), retrying what is retryable."""
        sent = self._headers(headers or {})
        shared = self.access.shared
        with self._all_lock:
            self._requests += 1
            request_no = self._requests
        attempt, waited = 0, 0.0
        while True:
            attempt += 1
            if shared is not None:
                shared.wait_out_pause(self._sleep, self._clock)
            with self._slot():
                reply = self._redact(self._once(method, path, body, sent))
            reply.attempts, reply.waited_s = attempt, round(waited, 3)
            if not reply.retryable or attempt > self.retries:
                return self._settle(reply)
            if reply.stale:
                continue
            wait = self._wait(attempt, reply, request_no)
            if waited + wait > self.max_wait_s:
                reply.gave_up = (f"the next wait, {wait:.0f} s, would pass execution.proxy.max_wait_s "
                                 f"= {self.max_wait_s:g} s")
                return self._settle(reply)
            if reply.status == 429 and shared is not None:
                shared.pause_until(self._clock() + wait)  # the batch's other runs hold back too
            self._sleep(wait)
            waited += wait

    def _settle(self, reply: Reply) -> Reply:
        """Note why the request failed when the upstream was at fault; clear it on success."""
        if reply.ok:
            self.failure = None
        elif reply.error is not None or reply.status in UPSTREAM_FAULTS:
            self.failure = describe_failure(reply, self.url, key_name=self.access.key_name, what=self.access.label)
        return reply

    def close(self) -> None:
        """Close every thread's connection."""
        with self._all_lock:
            for conn in self._all:
                conn.close()
            self._all.clear()


def _looks_like_json(reply: Reply) -> bool:
    """A 2xx reply whose body can be JSON: declared so, or starting like a JSON object or
    array (the proxy parses it; this only catches an HTML page or a plain-text answer)."""
    kind = reply.headers.get("content-type", "").lower()
    if "json" in kind:
        return True
    head = reply.body.lstrip()[:1]
    return head in (b"{", b"[")
