"""Test double for a hosted model provider: an OpenAI-compatible HTTP server in front of a
model server (here the scripted stand-in, ``forgetting scripted-model``, started separately).

A real provider cannot be reached from these machines and would bill; this stands in for
one. It forwards ``GET /v1/models`` and ``POST /v1/chat/completions`` to its upstream (with
the ``X-Forgetting-Run`` / ``X-Forgetting-Seed`` headers, never its own key), requires
``Authorization: Bearer <key>``, can be told to misbehave, and reports ``usage`` under its
*own* prompt-cache rules instead of the upstream's, in one of three API styles.

The cache rule (:func:`provider_cached_tokens`, a pure function; :class:`ProviderPrefixCache`
computes the same incrementally). With ``MIN_PREFIX = 1024`` and ``BLOCK = 128``:

* the cacheable length of ``n`` tokens is ``aligned(n) = 0`` if ``n < 1024``, else
  ``1024 + 128·⌊(n − 1024) / 128⌋`` — a prompt caches only whole 128-token blocks past a
  1,024-token minimum;
* a request's prompt is the token ids of its messages and tools in the served model's chat
  format, generation prompt included, as the upstream tokenizes them (vLLM's ``POST
  /tokenize`` with the messages, which the scripted stand-in answers too: the ids it counts
  as ``prompt_tokens``) — a provider caches what its model reads;
* the cache is per API key and per run (``X-Forgetting-Run``; a request without it shares
  its key's cache with the others without it); it starts empty, holds only *prompts* (never
  a completion), never evicts, and is written by every request — answered or not, as soon as
  it is forwarded;
* the cached tokens of prompt ``p`` are ``aligned(max_e lcp(p, e))`` over the earlier prompts
  ``e`` of the same cache (``lcp``: the length of the longest common prefix; 0 for the
  first), at most ``prompt_tokens`` (the upstream's count);
* *cache creation* (Anthropic's ``cache_creation_input_tokens``): ``aligned(len(p)) −
  cached`` — the blocks this request added.

So a prompt under 1,024 tokens never hits; a prefix shared with an earlier prompt counts
only to its last whole block; an edit in the middle of a history (a deletion) hits up to the
block before it. vLLM's cache (16-token blocks, no minimum: the cost reconstruction's ideal)
counts more: the known gap the cost validation shows.

Usage styles (``style``), ``prompt_tokens`` and ``completion_tokens`` always as the upstream
counted them, ``total_tokens`` their sum:

* ``openai``: ``prompt_tokens_details: {"cached_tokens": C}``;
* ``deepseek``: ``prompt_cache_hit_tokens: C``, ``prompt_cache_miss_tokens: prompt_tokens − C``;
* ``anthropic``: as a gateway (LiteLLM, OpenRouter) passes Anthropic's through Chat
  Completions: ``cache_read_input_tokens: C``, ``cache_creation_input_tokens: W``, and
  ``prompt_tokens`` the whole prompt (cached included); no ``prompt_tokens_details``.

Misbehaviour (:class:`Rule`, in-process ``provider.misbehave(...)``, or as a process ``POST
/_fake/rules`` with a JSON list of rules; ``DELETE /_fake/rules`` clears them; ``GET
/_fake/stats``: the requests seen, the most chat completions in flight at once): 401 (the key
revoked), an unknown model (the list names another model, chat answers 404), 429 with
``Retry-After`` (seconds, or an HTTP date), 5xx, a reply that is no JSON (an HTML page), or
slow replies — for the next N requests or always, after M normal ones, on chat only or on
every path. A wrong key is answered 401 with the wrong key repeated in the message, as a
careless provider does (the pipeline must redact it).

In-process (tests)::

    with FakeProvider(upstream_url, key="sk-test-…", style="deepseek") as provider:  # provider.url
        provider.misbehave(Rule("status", status=429, times=3, retry_after="1"))

As a process (the key from an environment variable, never the command line)::

    FORGETTING_DEMO_KEY=… python -m forgetting_testkit.fakes.provider \\
        --upstream http://127.0.0.1:8012/v1 --port 8011 --key-env FORGETTING_DEMO_KEY --style openai
"""

from __future__ import annotations

import argparse
import contextlib
import email.utils
import hashlib
import json
import os
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MIN_PREFIX = 1024
BLOCK = 128
STYLES = ("openai", "deepseek", "anthropic")
RUN_HEADER = "X-Forgetting-Run"
SEED_HEADER = "X-Forgetting-Seed"
#: what the provider's model list says owns a model it forwards (the upstream's own owner kept)
PROVIDER_NAME = "fake-provider (a test double for a hosted provider)"


# ------------------------------------------------------------------ the cache rule


def aligned(n: int, *, minimum: int = MIN_PREFIX, block: int = BLOCK) -> int:
    """The cacheable length of ``n`` tokens: 0 below ``minimum``, else down to a whole block."""
    return 0 if n < minimum else minimum + block * ((n - minimum) // block)


def _lcp(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def provider_cached_tokens(
    prompt: Sequence[int], earlier: Iterable[Sequence[int]], *, minimum: int = MIN_PREFIX, block: int = BLOCK
) -> int:
    """The cached tokens the provider reports for ``prompt`` after the ``earlier`` prompts of
    the same cache: ``aligned(max lcp(prompt, e))`` (the module docstring)."""
    longest = max((_lcp(prompt, e) for e in earlier), default=0)
    return aligned(longest, minimum=minimum, block=block)


def provider_cached_series(
    prompts: Sequence[Sequence[int]], *, minimum: int = MIN_PREFIX, block: int = BLOCK
) -> list[int]:
    """The cached tokens of each prompt of one run, in order (each against those before it)."""
    return [provider_cached_tokens(p, prompts[:i], minimum=minimum, block=block) for i, p in enumerate(prompts)]


class ProviderPrefixCache:
    """:func:`provider_cached_tokens` incrementally: the digests of every aligned prefix of the
    prompts seen (a prompt of n tokens stores ⌊(n − 1024) / 128⌋ + 1 of them)."""

    def __init__(self, *, minimum: int = MIN_PREFIX, block: int = BLOCK) -> None:
        self.minimum, self.block = minimum, block
        self._prefixes: set[bytes] = set()

    def _digests(self, prompt: Sequence[int]) -> list[tuple[int, bytes]]:
        out, h = [], hashlib.sha256()
        done = 0
        top = aligned(len(prompt), minimum=self.minimum, block=self.block)
        length = self.minimum
        while length <= top:
            h.update(array("I", prompt[done:length]).tobytes())
            done = length
            out.append((length, h.copy().digest()))
            length += self.block
        return out

    def lookup_and_store(self, prompt: Sequence[int]) -> tuple[int, int]:
        """(cached, created) for ``prompt``; then ``prompt`` is in the cache."""
        digests = self._digests(prompt)
        cached = 0
        for length, digest in digests:
            if digest in self._prefixes:
                cached = length
            else:
                break
        self._prefixes.update(d for _, d in digests)
        top = digests[-1][0] if digests else 0
        return cached, top - cached


def usage_in_style(style: str, prompt_tokens: int, completion_tokens: int, cached: int, created: int) -> dict[str, Any]:
    """The ``usage`` object the provider reports (the module docstring)."""
    cached = min(cached, prompt_tokens)
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if style == "openai":
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    elif style == "deepseek":
        usage["prompt_cache_hit_tokens"] = cached
        usage["prompt_cache_miss_tokens"] = prompt_tokens - cached
    elif style == "anthropic":
        usage["cache_read_input_tokens"] = cached
        usage["cache_creation_input_tokens"] = max(0, created)
    else:
        raise ValueError(f"unknown usage style {style!r}; one of {', '.join(STYLES)}")
    return usage


# ------------------------------------------------------------------ misbehaviour


@dataclass
class Rule:
    """One way to misbehave.

    ``kind``: ``status`` (answer ``status`` with an OpenAI-style error and, for 429,
    ``retry_after``), ``unauthorized`` (401 whatever the key), ``unknown_model`` (the model
    list names ``other-model``; chat answers 404), ``non_json`` (200 with an HTML page),
    ``slow`` (answer normally after ``delay_s``). It applies after ``after`` requests it
    would match were answered normally, to the next ``times`` (None: always); ``chat_only``:
    to chat completions only (else to every ``/v1`` path).
    """

    kind: str
    status: int = 503
    times: int | None = None
    after: int = 0
    retry_after: str | None = None
    delay_s: float = 0.0
    chat_only: bool = False
    seen: int = field(default=0, repr=False)
    used: int = field(default=0, repr=False)

    def applies(self, chat: bool) -> bool:
        """Count this request; True when the rule acts on it."""
        if self.chat_only and not chat:
            return False
        self.seen += 1
        if self.seen <= self.after or (self.times is not None and self.used >= self.times):
            return False
        self.used += 1
        return True

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Rule:
        return cls(**{k: v for k, v in data.items() if k not in ("seen", "used")})


def http_date(seconds_from_now: float) -> str:
    """An HTTP date ``seconds_from_now`` in the future (a ``Retry-After`` value)."""
    return email.utils.formatdate(time.time() + seconds_from_now, usegmt=True)


# ------------------------------------------------------------------ the server


class FakeProvider:
    """The fake provider on ``host:port`` (0: a free port) in a background thread."""

    def __init__(
        self,
        upstream: str,
        *,
        key: str,
        style: str = "openai",
        host: str = "127.0.0.1",
        port: int = 0,
        timeout_s: float = 600.0,
    ) -> None:
        if style not in STYLES:
            raise ValueError(f"unknown usage style {style!r}; one of {', '.join(STYLES)}")
        self.upstream = upstream.rstrip("/")
        if not self.upstream.endswith("/v1"):
            self.upstream += "/v1"
        self.key = key
        self.style = style
        self.timeout_s = timeout_s
        self.rules: list[Rule] = []
        self.requests: Counter[str] = Counter()  # "GET /v1/models", "POST /v1/chat/completions", …
        self.auth_failures = 0
        self.in_flight = 0  # chat completions being answered now
        self.max_in_flight = 0  # … at most, so far
        self._caches: dict[tuple[str, str | None], ProviderPrefixCache] = {}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((host, port), self._handler())
        self._server.daemon_threads = True
        self.host, self.port = host, int(self._server.server_address[1])
        self.url = f"http://{host}:{self.port}/v1"
        self._thread: threading.Thread | None = None

    # -- control -------------------------------------------------------------------------
    def misbehave(self, *rules: Rule) -> None:
        with self._lock:
            self.rules.extend(rules)

    def behave(self) -> None:
        """Drop every rule: answer normally again."""
        with self._lock:
            self.rules.clear()

    def _rule_for(self, chat: bool) -> Rule | None:
        with self._lock:
            for rule in self.rules:
                if rule.applies(chat):
                    return rule
        return None

    def cached(self, key: str, run: str | None, prompt: Sequence[int]) -> tuple[int, int]:
        with self._lock:
            cache = self._caches.setdefault((key, run), ProviderPrefixCache())
            return cache.lookup_and_store(prompt)

    # -- HTTP ----------------------------------------------------------------------------
    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_version = "fake-provider"

            def setup(self) -> None:
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: bytes, kind: str = "application/json",
                      extra: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                for k, v in (extra or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def _error(self, status: int, message: str, code: str, extra: dict[str, str] | None = None) -> None:
                body = {"error": {"message": message, "type": "invalid_request_error" if status < 500 else
                                  "server_error", "code": code}}
                self._send(status, json.dumps(body).encode(), extra=extra)

            def _path(self) -> str:
                return self.path.split("?", 1)[0].rstrip("/")

            def _authorised(self) -> bool:
                given = self.headers.get("Authorization", "")
                token = given[7:] if given.startswith("Bearer ") else given
                if token == fake.key:
                    return True
                with fake._lock:
                    fake.auth_failures += 1
                # a careless provider: the wrong key repeated in the message
                self._error(401, f"Incorrect API key provided: {token or '(none)'}. You can find your API key "
                                 "in your account settings.", "invalid_api_key")
                return False

            def _misbehaved(self, rule: Rule | None, model: str | None = None) -> bool:
                if rule is None:
                    return False
                if rule.kind == "slow":
                    time.sleep(rule.delay_s)
                    return False
                if rule.kind == "status":
                    extra = {"Retry-After": rule.retry_after} if rule.retry_after is not None else None
                    message = "Rate limit reached; try again later." if rule.status == 429 else (
                        f"The server had an error while processing your request (fake {rule.status}).")
                    self._error(rule.status, message, "rate_limit_exceeded" if rule.status == 429 else "server_error",
                                extra)
                elif rule.kind == "unauthorized":
                    self._error(401, "Your API key has been revoked.", "invalid_api_key")
                elif rule.kind == "unknown_model":
                    if model is None:  # the model list: another model only
                        body = {"object": "list", "data": [{"id": "other-model", "object": "model",
                                                            "owned_by": PROVIDER_NAME}]}
                        self._send(200, json.dumps(body).encode())
                    else:
                        self._error(404, f"The model `{model}` does not exist or you do not have access to it.",
                                    "model_not_found")
                elif rule.kind == "non_json":
                    self._send(200, b"<html><body><h1>Welcome to the gateway</h1></body></html>", "text/html")
                else:
                    self._error(500, f"fake provider: unknown rule {rule.kind!r}", "server_error")
                return True

            def _forward(self, method: str, path: str, body: bytes | None, *, root: bool = False) -> tuple[int, bytes]:
                """``path`` of the upstream's API (``root``: of its server root, as vLLM's ``/tokenize``)."""
                headers = {"Content-Type": "application/json"}
                for name in (RUN_HEADER, SEED_HEADER):
                    if self.headers.get(name) is not None:
                        headers[name] = self.headers[name]
                base = fake.upstream.removesuffix("/v1") if root else fake.upstream
                req = urllib.request.Request(base + path, data=body, method=method, headers=headers)
                try:
                    with urllib.request.urlopen(req, timeout=fake.timeout_s) as resp:
                        return resp.status, resp.read()
                except urllib.error.HTTPError as exc:
                    return exc.code, exc.read()
                except OSError as exc:
                    message = {"error": {"message": f"fake provider: upstream failed: {exc}", "code": "upstream"}}
                    return 502, json.dumps(message).encode()

            def _prompt_ids(self, request: dict[str, Any]) -> list[int] | None:
                """The request's prompt as the upstream tokenizes it (None: answered with its error)."""
                asked = {"model": request.get("model"), "messages": request.get("messages") or [],
                         "add_generation_prompt": True}
                if request.get("tools"):
                    asked["tools"] = request["tools"]
                status, body = self._forward("POST", "/tokenize", json.dumps(asked).encode(), root=True)
                if status != 200:
                    self._send(status, body)
                    return None
                return [int(t) for t in json.loads(body)["tokens"]]

            def do_GET(self) -> None:
                path = self._path()
                with fake._lock:
                    fake.requests[f"GET {path}"] += 1
                if path == "/health":
                    self._send(200, b'{"status": "ok"}')
                    return
                if path == "/_fake/stats":  # control: what it has seen
                    with fake._lock:
                        stats = {"requests": dict(fake.requests), "max_in_flight": fake.max_in_flight,
                                 "auth_failures": fake.auth_failures}
                    self._send(200, json.dumps(stats).encode())
                    return
                if path != "/v1/models":
                    self._error(404, f"no route GET {path}", "not_found")
                    return
                if not self._authorised() or self._misbehaved(fake._rule_for(chat=False)):
                    return
                status, body = self._forward("GET", "/models", None)
                self._send(status, body)

            def do_POST(self) -> None:
                path = self._path()
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with fake._lock:
                    fake.requests[f"POST {path}"] += 1
                if path == "/_fake/rules":  # control: a JSON list of rules
                    fake.misbehave(*(Rule.from_dict(r) for r in json.loads(raw or b"[]")))
                    self._send(200, json.dumps([asdict(r) for r in fake.rules]).encode())
                    return
                if path != "/v1/chat/completions":
                    self._error(404, f"no route POST {path}", "not_found")
                    return
                if not self._authorised():
                    return
                try:
                    request = json.loads(raw)
                except ValueError:
                    self._error(400, "the body is not valid JSON", "invalid_json")
                    return
                with fake._lock:
                    fake.in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                try:
                    self._chat(raw, request)
                finally:
                    with fake._lock:
                        fake.in_flight -= 1

            def _chat(self, raw: bytes, request: dict[str, Any]) -> None:
                if self._misbehaved(fake._rule_for(chat=True), str(request.get("model"))):
                    return
                prompt = self._prompt_ids(request)
                if prompt is None:
                    return
                cached, created = fake.cached(fake.key, self.headers.get(RUN_HEADER), prompt)
                status, body = self._forward("POST", "/chat/completions", raw)
                if status != 200:
                    self._send(status, body)
                    return
                reply = json.loads(body)
                usage = reply.get("usage") or {}
                reply["usage"] = usage_in_style(fake.style, int(usage.get("prompt_tokens", len(prompt))),
                                                int(usage.get("completion_tokens", 0)), cached, created)
                self._send(200, json.dumps(reply).encode())

            def do_DELETE(self) -> None:
                if self._path() == "/_fake/rules":
                    fake.behave()
                    self._send(200, b"[]")
                else:
                    self._error(404, f"no route DELETE {self._path()}", "not_found")

        return Handler

    def start(self) -> FakeProvider:
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-provider", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="a test double for a hosted OpenAI-compatible model provider")
    parser.add_argument("--upstream", required=True, help="the model server it forwards to (…/v1)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--key-env", required=True, help="the environment variable holding the key it accepts")
    parser.add_argument("--style", default="openai", choices=STYLES, help="how usage reports cached tokens")
    parser.add_argument("--port-file", help="write the bound port here once listening")
    args = parser.parse_args(argv)
    key = os.environ.get(args.key_env, "")
    if not key:
        print(f"error: --key-env {args.key_env}: the variable is not set", file=sys.stderr)
        return 2
    provider = FakeProvider(args.upstream, key=key, style=args.style, host=args.host, port=args.port)
    if args.port_file:
        tmp = f"{args.port_file}.tmp"
        with open(tmp, "w") as fh:
            fh.write(f"{provider.port}\n")
        os.replace(tmp, args.port_file)
    print(f"fake provider (a test double): {provider.url} -> {provider.upstream}, usage style {args.style}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        provider._server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
