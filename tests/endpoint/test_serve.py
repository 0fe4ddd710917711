"""Cluster route C on one machine: ``forgetting serve`` runs the model server as a job of its
own and publishes its address; batches whose ``model.endpoint.address_file`` names it wait
for it (bounded), connect, and notice when it goes away. The server here is the scripted
stand-in (``--backend scripted``) or the vLLM test double; the batches are real."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from forgetting.endpoint.address import AddressError, ServerAddress, publish_address, read_address, wait_for_address
from forgetting.foundation.errors import UserError
from forgetting.foundation.layout import RUN_JSON
from forgetting.run import run_batch
from forgetting.study.config import load_study
from forgetting_testkit import fakes
from forgetting_testkit.checkout import ROOT, cli_env
from forgetting_testkit.endpoints import KEY_ENV, TEST_KEY, files_holding, key_env
from forgetting_testkit.runner import batch_of, run_dir, write_study

ADDRESS = ServerAddress(base_url="http://gpu017:8000/v1", host="gpu017", port=8000, model="qwen3-coder",
                        backend="vllm", started="2026-04-02T10:11:12Z", job_id="123456", pid=4242)


def test_the_address_file_round_trips_and_a_bad_one_is_one_line(tmp_path):
    path = tmp_path / "server" / "address.json"
    publish_address(path, ADDRESS)
    assert read_address(path) == ADDRESS
    assert "by job 123456 at 2026-04-02T10:11:12Z" in ADDRESS.where(path)
    for text, why in (("{", "not a model server address file"), ("[]", "expected a JSON object"),
                      (json.dumps({**json.loads(path.read_text()), "port": "8000"}), "field 'port'")):
        path.write_text(text)
        with pytest.raises(AddressError, match=why) as error:
            read_address(path)
        assert str(path) in str(error.value)


def test_a_batch_waits_for_the_address_a_bounded_time(tmp_path):
    missing = tmp_path / "never.json"
    said: list[str] = []
    t0 = time.monotonic()
    with pytest.raises(AddressError) as error:
        wait_for_address(missing, 0.3, say=said.append, poll_s=0.05)
    assert 0.3 <= time.monotonic() - t0 < 5
    assert str(error.value) == (
        f"{missing}: no model server address after 0.3 s (model.endpoint.address_wait_s); start the server job "
        "(`forgetting serve`, docs/cluster.md route C) or check that it runs")
    assert said == [f"waiting up to 0.3 s for the model server's address in {missing}"]


def _route_c_study(tmp_path, **endpoint):
    address = tmp_path / "results" / "model-server" / "address.json"
    model = {"backend": "endpoint", "name": "scripted-careful-agent", "served_name": "scripted", "max_tokens": 4096,
             "endpoint": {"address_file": str(address), "address_wait_s": 120, **endpoint}}
    config = write_study(tmp_path, model=model, repeats={"baseline": 2, "deletion": 1},
                         execution={"concurrency": 2, "scratch_dir": str(tmp_path / "scratch")})
    return config, address


@pytest.mark.slow
def test_a_model_server_job_publishes_its_address_and_batches_wait_for_it(tmp_path):
    config, address = _route_c_study(tmp_path)
    study = load_study(config)
    batch = batch_of(study, "mini", "baseline")
    env = cli_env({"SLURM_JOB_ID": "777001"})
    run = subprocess.Popen([sys.executable, "-m", "forgetting", "run-batch", str(config), "--batch", batch.key],
                           cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # the batch starts first, its server job still queued: it says it waits
    assert run.stderr is not None
    seen = []
    while not any("waiting up to" in line for line in seen):
        line = run.stderr.readline()
        assert line, (seen, run.wait())
        seen.append(line)
    assert run.poll() is None and not address.exists()
    serve = subprocess.Popen([sys.executable, "-m", "forgetting", "serve", str(config), "--backend", "scripted",
                              "--host", "127.0.0.1"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        _, rest = run.communicate(timeout=300)
        err = "".join(seen) + rest
        assert run.returncode == 0, err
        published = read_address(address)
        assert published.job_id == "777001" and published.backend == "scripted" and published.model == "scripted"
        assert published.base_url == f"http://127.0.0.1:{published.port}/v1"
        assert f"waiting up to 120 s for the model server's address in {address}" in err
        assert f"model endpoint {published.base_url} ready" in err
        for r in batch.runs:
            record = json.loads((run_dir(study, r.run_id) / RUN_JSON).read_text())
            assert record["status"] == "submitted" and record["model_backend"] == "scripted"
            assert record["versions"]["model"]["endpoint"] == published.base_url
    finally:
        serve.send_signal(signal.SIGTERM)  # scancel, or the job's time limit
        log, _ = serve.communicate(timeout=60)
    assert serve.returncode == 0, log
    assert not address.exists()  # withdrawn: no batch connects to a server that is gone
    assert "address published in" in log and "stopping: address withdrawn" in log
    assert (address.parent / "model_server.log").is_file()


@pytest.mark.slow
def test_a_batch_notices_its_server_job_withdraw_the_address(tmp_path, monkeypatch):
    import forgetting.endpoint.backend as backend

    config, address = _route_c_study(tmp_path, address_wait_s=60)
    study = load_study(config, {"repeats": {"baseline": 3, "deletion": 1},
                                "execution": {"concurrency": 1, "scratch_dir": str(tmp_path / "scratch")}})
    batch = batch_of(study, "mini", "baseline")
    first = run_dir(study, batch.runs[0].run_id)
    serve = subprocess.Popen([sys.executable, "-m", "forgetting", "serve", str(config), "--backend", "scripted",
                              "--host", "127.0.0.1"], cwd=ROOT, env=cli_env(), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    real = backend.ServedEndpoint.trouble

    def the_job_ends_after_the_first_run(self, check_health):  # scancel while the batch goes on
        if (first / RUN_JSON).exists() and serve.poll() is None:
            serve.send_signal(signal.SIGTERM)
            serve.wait(timeout=30)
        return real(self, check_health)

    monkeypatch.setattr(backend.ServedEndpoint, "trouble", the_job_ends_after_the_first_run)
    try:
        with pytest.raises(UserError, match=r"2 of 3 runs did not finish.*the model server job withdrew or "
                                            r"replaced its address in "):
            run_batch(study, batch, echo=False)
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
    assert (first / RUN_JSON).is_file() and not address.exists()


@pytest.mark.slow
def test_serve_gives_vllm_the_key_in_its_environment_never_on_its_command_line(tmp_path):
    wrapper = tmp_path / "vllm"
    seen = tmp_path / "seen-key"
    wrapper.write_text(f'#!/bin/sh\nprintf %s "$VLLM_API_KEY" > {seen}\nexec {sys.executable} {fakes.VLLM} "$@"\n')
    wrapper.chmod(0o755)
    address = tmp_path / "results" / "model-server" / "address.json"
    model = {"backend": "endpoint", "name": "fake/model", "served_name": "fake",
             "vllm": {"executable": str(wrapper), "startup_timeout_s": 60},
             "endpoint": {"address_file": str(address), "api_key_env": KEY_ENV}}
    config = write_study(tmp_path, model=model)
    serve = subprocess.Popen([sys.executable, "-m", "forgetting", "serve", str(config), "--host", "127.0.0.1"],
                             cwd=ROOT, env=key_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        end = time.monotonic() + 60
        while not address.exists():
            assert time.monotonic() < end and serve.poll() is None, serve.communicate()
            time.sleep(0.05)
        assert seen.read_text() == TEST_KEY
    finally:
        serve.send_signal(signal.SIGTERM)
        out, _ = serve.communicate(timeout=60)
    assert serve.returncode == 0, out
    assert TEST_KEY not in out and files_holding(TEST_KEY, tmp_path / "results") == []
    assert "--api-key" not in (address.parent / "model_server.log").read_text()


def test_serve_needs_an_address_file(tmp_path, run_cli):
    config = write_study(tmp_path, model={"backend": "endpoint", "name": "m",
                                          "endpoint": {"base_url": "http://127.0.0.1:9/v1"}})
    done = run_cli("serve", str(config), "--backend", "scripted")
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "error: model.endpoint.address_file: not set; forgetting serve publishes its address there (and the "
        "batches read it from there)"]


def _ask(url: str, key: str | None, body: dict | None = None) -> int:
    import urllib.error
    import urllib.request

    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    data = json.dumps(body).encode() if body is not None else None
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(urllib.request.Request(url, data=data, headers=headers), timeout=30) as resp:
            resp.read()
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.slow
def test_nothing_of_the_served_model_answers_without_the_key(tmp_path):
    """vLLM's --api-key guards only /v1 paths (its double does as vLLM's middleware does):
    /invocations and /health would answer anyone. With a key, serve puts vLLM on loopback behind
    a front that checks the key on every request."""
    argv = tmp_path / "vllm-argv.json"
    address = tmp_path / "results" / "model-server" / "address.json"
    model = {"backend": "endpoint", "name": "fake/model", "served_name": "fake",
             "vllm": {"executable": str(fakes.install(fakes.VLLM, tmp_path / "bin" / "vllm")), "startup_timeout_s": 60},
             "endpoint": {"address_file": str(address), "api_key_env": KEY_ENV}}
    config = write_study(tmp_path, model=model)
    env = {**key_env(), "FAKE_VLLM_ARGV": str(argv)}
    serve = subprocess.Popen([sys.executable, "-m", "forgetting", "serve", str(config), "--host", "127.0.0.1"],
                             cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        end = time.monotonic() + 60
        while not address.exists():
            assert time.monotonic() < end and serve.poll() is None, serve.communicate()
            time.sleep(0.05)
        base = f"http://127.0.0.1:{read_address(address).port}"
        chat = {"model": "fake", "messages": [{"role": "user", "content": "hi"}]}
        for path, body in [("/health", None), ("/invocations", chat), ("/v1/models", None),
                           ("/v1/chat/completions", chat), ("/metrics", None)]:
            assert _ask(base + path, None, body) == 401, path
            assert _ask(base + path, "wrong-key", body) == 401, path
        assert _ask(base + "/v1/models", TEST_KEY) == 200
        assert _ask(base + "/invocations", TEST_KEY, chat) == 200
        assert _ask(base + "/v1/chat/completions", TEST_KEY, chat) == 200
        inner = json.loads(argv.read_text())
        assert inner[inner.index("--host") + 1] == "127.0.0.1"  # vLLM itself: loopback only
        assert int(inner[inner.index("--port") + 1]) != read_address(address).port
    finally:
        serve.send_signal(signal.SIGTERM)
        out, _ = serve.communicate(timeout=60)
    assert serve.returncode == 0, out
    assert "every request needs the key" in out
