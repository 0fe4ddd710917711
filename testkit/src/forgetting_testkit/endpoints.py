"""Model endpoints for the endpoint tests, each a process of its own as a user would start
it: the scripted stand-in (``forgetting scripted-model``), the named fake provider in front
of a model server (``python -m forgetting_testkit.fakes.provider``; steered over its
``/_fake/`` control paths), the vLLM test double, and a study whose model is such an
endpoint. Processes rather than threads of the test: a batch forks its runs, and a fork
inherits no thread but may inherit a thread's held lock."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from forgetting_testkit import fakes
from forgetting_testkit.checkout import ROOT, cli_env
from forgetting_testkit.fakes.provider import Rule

#: the recognisable key the key-leak tests look for everywhere
TEST_KEY = "sk-forgetting-test-KEY-5e1d7c39a0b2"
KEY_ENV = "FORGETTING_TEST_ENDPOINT_KEY"
TASKS = ROOT / "resources" / "demo" / "tasks"


def _wait_for_port(port_file: Path, process: subprocess.Popen[bytes], timeout_s: float = 60.0) -> int:
    end = time.monotonic() + timeout_s
    while not port_file.is_file() or not port_file.read_text().strip():
        if process.poll() is not None:
            raise RuntimeError(f"the process exited with status {process.returncode} before it listened")
        if time.monotonic() > end:
            raise RuntimeError(f"no port in {port_file} after {timeout_s:g} s")
        time.sleep(0.05)
    return int(port_file.read_text())


@contextlib.contextmanager
def _process(cmd: list[str], port_file: Path, log: Path, env: dict[str, str] | None = None) -> Iterator[int]:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        process = subprocess.Popen(cmd, cwd=ROOT, env={**cli_env(), **(env or {})}, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield _wait_for_port(port_file, process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def scripted_model(tmp: Path, *, extra: list[str] | None = None) -> Iterator[str]:
    """``forgetting scripted-model`` on a free port, as docs/runs.md starts it; yields its base URL."""
    port_file = tmp / "scripted.port"
    cmd = [sys.executable, "-m", "forgetting", "scripted-model", "--tasks", str(TASKS), "--port-file",
           str(port_file), *(extra or [])]
    with _process(cmd, port_file, tmp / "scripted-model.log") as port:
        yield f"http://127.0.0.1:{port}/v1"


@contextlib.contextmanager
def fake_vllm(tmp: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """The vLLM test double (canned replies; ``FAKE_VLLM_*`` in ``env``) on a free port."""
    from forgetting.run.model_server import free_port

    port = free_port()
    port_file = tmp / "fake-vllm.port"
    port_file.write_text(f"{port}\n")
    cmd = [sys.executable, str(fakes.VLLM), "serve", "fake/model", "--host", "127.0.0.1", "--port", str(port),
           "--served-model-name", "fake"]
    with _process(cmd, port_file, tmp / "fake-vllm.log", env):
        url = f"http://127.0.0.1:{port}"
        end = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(url + "/health", timeout=2):
                    break
            except OSError:
                if time.monotonic() > end:
                    raise
                time.sleep(0.05)
        yield url + "/v1"


class ProviderProcess:
    """The fake provider as a process: its URL and its control paths."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.root = url.rsplit("/v1", 1)[0]

    def _control(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.root + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def misbehave(self, *rules: Rule) -> None:
        self._control("POST", "/_fake/rules", [asdict(r) for r in rules])

    def behave(self) -> None:
        self._control("DELETE", "/_fake/rules")

    def stats(self) -> dict[str, Any]:
        return self._control("GET", "/_fake/stats")


@contextlib.contextmanager
def provider(tmp: Path, upstream: str, *, key: str = TEST_KEY, style: str = "openai") -> Iterator[ProviderProcess]:
    """The fake provider in front of ``upstream``, accepting ``key`` (from its environment)."""
    port_file = tmp / "provider.port"
    cmd = [sys.executable, "-m", "forgetting_testkit.fakes.provider", "--upstream", upstream, "--key-env",
           "FAKE_PROVIDER_KEY", "--style", style, "--port-file", str(port_file)]
    with _process(cmd, port_file, tmp / "provider.log", {"FAKE_PROVIDER_KEY": key}) as port:
        yield ProviderProcess(f"http://127.0.0.1:{port}/v1")


def endpoint_model(base_url: str, *, served_name: str = "scripted", **endpoint: Any) -> dict[str, Any]:
    """A ``model`` section for a study whose model is the endpoint at ``base_url``."""
    return {
        "backend": "endpoint", "name": "scripted-careful-agent", "served_name": served_name, "max_tokens": 4096,
        "endpoint": {"base_url": base_url, "api_key_env": KEY_ENV, **endpoint},
    }


def files_holding(text: str, *roots: Path) -> list[str]:
    """Every file under ``roots`` whose bytes contain ``text``."""
    needle = text.encode()
    return sorted(str(p) for root in roots if root.exists() for p in root.rglob("*")
                  if p.is_file() and needle in p.read_bytes())


def key_env(key: str = TEST_KEY) -> dict[str, str]:
    """An environment (this one's, for subprocesses) with the key variable set."""
    return {**os.environ, **cli_env(), KEY_ENV: key}
