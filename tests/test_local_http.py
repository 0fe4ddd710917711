"""Health checks and probes of this node's own servers never go through a site's proxy: a
site that sets ``http_proxy`` without a ``no_proxy`` naming loopback would send them there."""

from __future__ import annotations

import http.server
import threading
import urllib.request

import pytest

from forgetting.run.model_server import wait_healthy, with_loopback_no_proxy


class _Answer(http.server.BaseHTTPRequestHandler):
    status = 200
    seen: list[str]

    def do_GET(self):
        type(self).seen.append(self.path)
        self.send_response(self.status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def _serve(status: int) -> tuple[http.server.HTTPServer, list[str]]:
    handler = type("H", (_Answer,), {"status": status, "seen": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, handler.seen


def test_health_checks_to_loopback_bypass_a_site_proxy(monkeypatch):
    model, model_seen = _serve(200)
    proxy, proxy_seen = _serve(502)  # a site proxy that cannot reach this node's loopback
    try:
        for key in ("no_proxy", "NO_PROXY"):
            monkeypatch.delenv(key, raising=False)
        monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{proxy.server_port}")
        url = f"http://127.0.0.1:{model.server_port}/health"
        with pytest.raises(urllib.error.HTTPError):  # what a default opener made now does (urlopen's is made once)
            urllib.request.build_opener().open(url, timeout=5)
        assert proxy_seen
        proxy_seen.clear()
        assert wait_healthy(url, timeout_s=5, interval_s=0.1) < 5
        assert model_seen == ["/health"] and proxy_seen == []
    finally:
        model.shutdown()
        proxy.shutdown()


def test_the_servers_block_size_is_read_from_loopback_past_a_site_proxy(monkeypatch):
    from forgetting.run.model_server import cache_info

    model, model_seen = _serve(200)
    proxy, proxy_seen = _serve(502)
    try:
        for key in ("no_proxy", "NO_PROXY"):
            monkeypatch.delenv(key, raising=False)
        monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{proxy.server_port}")
        assert cache_info(f"http://127.0.0.1:{model.server_port}/v1") == {}  # it publishes no block
        assert model_seen == ["/metrics"] and proxy_seen == []
    finally:
        model.shutdown()
        proxy.shutdown()


def test_agents_environment_names_loopback_in_no_proxy():
    env = with_loopback_no_proxy({"http_proxy": "http://proxy:3128", "no_proxy": ".site.org"})
    assert env["no_proxy"] == ".site.org,127.0.0.1,localhost,::1" and env["NO_PROXY"] == "127.0.0.1,localhost,::1"
    assert with_loopback_no_proxy(env) == env  # once
