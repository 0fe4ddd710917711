"""The API key in the spellings a provider may echo it in — as sent, JSON-escaped (once and
twice, ``\\/``, ``\\uXXXX``), URL-encoded, base64 at any alignment (a ``Basic`` echo, a wrapped
token) — never reaches the agent (the reply's body and headers) nor the endpoint's log: the
upstream here is a hostile stand-in that echoes the key it was sent in every one of them."""

from __future__ import annotations

import base64
import json
import re
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from forgetting.foundation.errors import UserError
from forgetting.run.proxy.key_spellings import spellings
from forgetting.run.proxy.upstream import Access, Upstream
from forgetting.study.proxy import ProxySettings
from forgetting_testkit.runner import filled_model

#: the schema's proxy settings
PROXY_DEFAULTS = ProxySettings.from_parts()

#: a key with the characters JSON and URL encodings change
KEY = "sk-proj/Ab+cd=EF_0123-hostile-key/xyz"


def echoes(key: str) -> dict[str, str]:
    """The key as a hostile provider writes it back, by spelling."""
    raw = key.encode()
    return {
        "as sent": key,
        "JSON-escaped /": key.replace("/", "\\/"),
        "JSON \\u escapes": "".join(f"\\u{ord(c):04x}" for c in key),
        "JSON \\U escapes": "".join(f"\\u{ord(c):04X}" for c in key),
        "URL-encoded": urllib.parse.quote(key, safe=""),
        "URL-encoded, lower hex": re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(),
                                         urllib.parse.quote(key, safe="")),
        "form-encoded": urllib.parse.quote_plus(key),
        "base64": base64.b64encode(raw).decode(),
        "base64 Basic": base64.b64encode(b"user:" + raw).decode(),
        "base64 Bearer": base64.b64encode(b"Bearer " + raw).decode(),
        "base64 shifted 2": base64.b64encode(b"ab" + raw + b"z").decode(),
        "base64 url-safe": base64.urlsafe_b64encode(b"x" + raw).decode(),
    }


def leaks(text: str, key: str = KEY) -> list[str]:
    """Every way ``text`` still gives the key away: as it stands, JSON- or URL-decoded, or
    base64-decoded (each run of base64 characters, at each alignment)."""
    found = []
    views = {"as is": text, "URL-decoded": urllib.parse.unquote_plus(text)}
    try:
        views["JSON-decoded"] = json.dumps(json.loads(text))  # \u escapes undone
        views["JSON-decoded twice"] = str(json.loads(json.loads(text)))
    except (ValueError, TypeError):
        pass
    for name, view in views.items():
        if key in view or key in view.replace("\\/", "/"):
            found.append(name)
    for run in re.findall(r"[A-Za-z0-9+/_\-=]{12,}", text):
        for start in range(4):
            chunk = run[start:].rstrip("=")
            chunk = chunk[: len(chunk) - len(chunk) % 4]
            for alphabet in (None, b"-_"):
                try:
                    decoded = base64.b64decode(chunk, altchars=alphabet)
                except ValueError:
                    continue
                if key.encode() in decoded:
                    found.append(f"base64 {run[:20]}…")
    return found


class Echo(BaseHTTPRequestHandler):
    """401 on everything, its message, a JSON debug field and a header repeating the key it got."""

    def do_GET(self) -> None:
        got = self.headers.get("Authorization", "").removeprefix("Bearer ")
        spelled = echoes(got)
        message = "Incorrect API key provided: " + " | ".join(f"{k}={v}" for k, v in spelled.items())
        inner = json.dumps({"error": {"message": f"wrapped {got}"}})
        body = json.dumps({"error": {"message": message, "type": "invalid_request_error"},
                           "debug": {"echo": spelled, "inner": inner}}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("WWW-Authenticate", f'Bearer error="invalid_token" token="{spelled["base64 Basic"]}"')
        self.send_header("X-Echo", spelled["URL-encoded"])
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def echo_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_the_spellings_cover_every_echo():
    forms = spellings(KEY)
    for name, echoed in echoes(KEY).items():
        text = echoed.encode()
        for form in forms:
            text = text.replace(form, b"[redacted]")
        assert not leaks(text.decode()), name


def test_no_spelling_of_the_key_reaches_the_reply(echo_url):
    upstream = Upstream(echo_url, retries=0, access=Access(api_key=KEY, key_name="K"))
    try:
        reply = upstream.request("GET", "/models")
    finally:
        upstream.close()
    assert reply.status == 401
    body = reply.body.decode()
    assert body.count("[redacted]") >= len(echoes(KEY))
    assert not leaks(body), body
    for name, value in reply.headers.items():
        assert not leaks(value), (name, value)


def test_no_spelling_of_the_key_reaches_the_endpoint_log_or_the_error(echo_url, tmp_path, monkeypatch):
    from forgetting.endpoint.backend import EndpointBackend
    from forgetting_testkit.endpoints import KEY_ENV, endpoint_model

    monkeypatch.setenv(KEY_ENV, KEY)
    log = tmp_path / "model_server.log"
    with pytest.raises(UserError, match=r"refused the API key in \$" + KEY_ENV) as caught:  # noqa: SIM117
        with EndpointBackend().serving(filled_model(endpoint_model(echo_url)), log_path=log,
                                       proxy_settings=PROXY_DEFAULTS):
            pass
    assert "[redacted]" in str(caught.value)
    assert not leaks(str(caught.value)), str(caught.value)
    text = log.read_text()
    assert "refused the API key" in text and not leaks(text), text


def test_a_key_that_is_not_ascii_is_one_line_naming_the_variable():
    from forgetting.study.endpoint import read_api_key

    for key in ("sk-ключ-123", "sk-\u2013dash", "sk-caf\xe9"):
        with pytest.raises(UserError, match=r"model.endpoint.api_key_env: the value of K holds a character outside "
                                            r"ASCII") as caught:
            read_api_key("K", {"K": key})
        assert key not in str(caught.value)


def test_credentials_in_an_address_files_base_url_are_refused_and_never_echoed(tmp_path: Path):
    from forgetting.endpoint.address import AddressError, read_address

    secret = "sk-in-the-address-42"
    for url in (f"http://user:{secret}@127.0.0.1:8000/v1", f"http://{secret}@gpu017:8000/v1",
                f"ftp://{secret}@gpu017/v1"):
        path = tmp_path / "address.json"
        path.write_text(json.dumps({"base_url": url, "host": "gpu017", "port": 8000, "model": "m",
                                    "backend": "vllm", "started": "now", "job_id": None, "pid": 1}))
        with pytest.raises(AddressError) as caught:
            read_address(path)
        message = str(caught.value)
        assert message.startswith(f"{path}: field 'base_url' (model.endpoint.address_file)"), message
        assert secret not in message and "model.endpoint.base_url" not in message


def test_upstream_urls_with_credentials_are_refused_without_echoing_them():
    from forgetting.run.proxy.upstream import base_url

    for url in ("http://u:sk-secret-9@127.0.0.1:8000/v1", "http://sk-secret-9@[::1/v1", "gopher://sk-secret-9@h/v1"):
        with pytest.raises(UserError) as caught:
            base_url(url)
        assert "sk-secret-9" not in str(caught.value), str(caught.value)
