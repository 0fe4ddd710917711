"""A batch against a bad endpoint: unreachable, the key refused, the model unknown, rate
limited past the retries, failing, answering something that is no JSON, slower than the
per-request timeout. Each is one error
line naming the endpoint (its base URL, never the key) and what to do, raised by the check
before any run — no run directory, no leftover, no run process — and written to the batch's
log. The endpoint: the scripted stand-in (``forgetting scripted-model``) behind the named fake
provider (a test double for a hosted provider), each a process of its own."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from forgetting.foundation.errors import UserError
from forgetting.foundation.layout import Layout
from forgetting.run import run_batch
from forgetting.run.model_server import free_port
from forgetting.study.config import load_study
from forgetting_testkit.checkout import ROOT
from forgetting_testkit.endpoints import (
    KEY_ENV,
    TEST_KEY,
    endpoint_model,
    files_holding,
    key_env,
    provider,
    scripted_model,
)
from forgetting_testkit.fakes.provider import Rule, http_date
from forgetting_testkit.runner import batch_of, study_at, write_study

FAST = {"retries": 2, "backoff_s": 0.01, "backoff_max_s": 0.05, "max_wait_s": 5}


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("endpoint")
    with scripted_model(tmp) as upstream, provider(tmp, upstream) as fake:
        yield fake


@pytest.fixture
def behaving(endpoint):
    endpoint.behave()
    yield endpoint
    endpoint.behave()


def _study(tmp_path, url, **endpoint):
    return study_at(tmp_path, model=endpoint_model(url, **endpoint), execution={
        "concurrency": 1, "scratch_dir": str(tmp_path / "scratch"), "proxy": FAST})


def _closed_port_url() -> str:
    return f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there


CASES = {
    # name: (rules, key, base URL (None: the provider's), the message's telling part)
    "unreachable": ([], TEST_KEY, "closed", r"unreachable: \[Errno 111\] Connection refused after 3 attempts"
                                            r".*check that the server runs and that its address is right"),
    "wrong key": ([], "sk-wrong-key-123", None, r"refused the API key in \$FORGETTING_TEST_ENDPOINT_KEY \(HTTP 401: "
                                               r"Incorrect API key provided: \[redacted\]"),
    "key revoked": ([Rule("unauthorized")], TEST_KEY, None, r"refused the API key in \$FORGETTING_TEST_ENDPOINT_KEY"
                                                           r" \(HTTP 401: Your API key has been revoked\)"),
    "unknown model": ([Rule("unknown_model")], TEST_KEY, None,
                      r"does not serve 'scripted' \(GET /v1/models lists other-model\); set model.served_name"),
    "429 storm": ([Rule("status", status=429, retry_after="0.2")], TEST_KEY, None,
                  r"kept answering HTTP 429 \(rate limited\) after 3 attempts over 0.4 s: Rate limit reached; try "
                  r"again later; lower model.endpoint.max_concurrent_requests"),
    "429 past the wait budget": ([Rule("status", status=429, retry_after="__date__")], TEST_KEY, None,
                                 r"kept answering HTTP 429 \(rate limited\) after 1 attempt \(the next wait, \d+ s, "
                                 r"would pass execution.proxy.max_wait_s = 5 s\)"),
    "5xx": ([Rule("status", status=503)], TEST_KEY, None,
            r"answered HTTP 503 after 3 attempts over 0.\d s: The server had an error .*; the server is failing: "
            r"retry later"),
    "non-JSON": ([Rule("non_json")], TEST_KEY, None,
                 r"answered HTTP 200 with text/html, not JSON; is the base URL the server's OpenAI API root"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_endpoint_is_one_line_naming_it_and_no_run_starts(tmp_path, behaving, monkeypatch, case):
    rules, key, base, telling = CASES[case]
    for rule in rules:
        if rule.retry_after == "__date__":
            rule.retry_after = http_date(120)  # an HTTP date two minutes away: past the 5 s budget
    behaving.misbehave(*rules)
    url = _closed_port_url() if base == "closed" else behaving.url
    monkeypatch.setenv(KEY_ENV, key)
    study = _study(tmp_path, url)
    batch = batch_of(study, "mini", "baseline")
    log = tmp_path / "batch.log"
    with pytest.raises(UserError) as error:
        run_batch(study, batch, log=log, echo=False)
    message = str(error.value)
    assert "\n" not in message and message.startswith("model endpoint http://127.0.0.1:")
    assert url.rstrip("/") in message, message
    assert re.search(telling, message), message
    assert key not in message and TEST_KEY not in message
    layout = Layout(study.results_dir)
    assert not (layout.results / "runs").exists()  # no run started: not even a temporary directory
    assert f"error: {message}" in log.read_text()
    assert files_holding(TEST_KEY, study.results_dir, tmp_path) == []


def test_an_endpoint_slower_than_the_per_request_timeout_is_one_line_naming_the_key_to_raise(
        tmp_path, behaving, monkeypatch):
    behaving.misbehave(Rule("slow", delay_s=3.0))  # every path: the check's GET /v1/models too
    monkeypatch.setenv(KEY_ENV, TEST_KEY)
    study = study_at(tmp_path, model=endpoint_model(behaving.url), execution={
        "concurrency": 1, "scratch_dir": str(tmp_path / "scratch"), "proxy": {**FAST, "timeout_s": 0.5}})
    before = behaving.stats()["requests"].get("GET /v1/models", 0)
    with pytest.raises(UserError) as error:
        run_batch(study, batch_of(study, "mini", "baseline"), echo=False)
    # one attempt, cut at the timeout: a read timeout is not retried (the server may be generating)
    assert behaving.stats()["requests"].get("GET /v1/models", 0) == before + 1
    assert str(error.value) == (f"model endpoint {behaving.url} did not answer within 0.5 s; a generation that long "
                                "needs a larger execution.proxy.timeout_s, else the server is stuck")
    assert not (Layout(study.results_dir).results / "runs").exists()


def test_an_unset_key_variable_is_named_before_the_endpoint_is_asked(tmp_path, behaving, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    study = _study(tmp_path, behaving.url)
    before = behaving.stats()["requests"].get("GET /v1/models", 0)
    with pytest.raises(UserError, match=f"model.endpoint.api_key_env: the environment variable {KEY_ENV} is not "
                                        "set where the batch runs"):
        run_batch(study, batch_of(study, "mini", "baseline"), echo=False)
    assert behaving.stats()["requests"].get("GET /v1/models", 0) == before


def test_a_bad_endpoint_is_refused_before_the_agent_and_litellm_are_imported(tmp_path, behaving):
    """The endpoint check comes first: its one line does not wait for the seconds that importing
    mini-swe-agent and litellm takes (more on a loaded machine), which it used to follow."""
    behaving.misbehave(Rule("status", status=502))
    config = write_study(tmp_path, model=endpoint_model(behaving.url), execution={
        "concurrency": 1, "scratch_dir": str(tmp_path / "scratch"), "proxy": FAST})
    key = batch_of(load_study(config), "mini", "baseline").key
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "forgetting", "run-batch", str(config),
                           "--batch", key], cwd=ROOT, env=key_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "litellm" not in imported and "minisweagent" not in imported


def test_the_command_line_prints_one_error_line_and_exits_2(tmp_path, behaving):
    behaving.misbehave(Rule("status", status=502))
    config = write_study(tmp_path, model=endpoint_model(behaving.url), execution={
        "concurrency": 1, "scratch_dir": str(tmp_path / "scratch"), "proxy": FAST})
    study = load_study(config)
    key = batch_of(study, "mini", "baseline").key
    # a hang guard, not a speed limit: the one line comes before mini-swe-agent and litellm load
    done = subprocess.run([sys.executable, "-m", "forgetting", "run-batch", str(config), "--batch", key],
                          cwd=ROOT, env=key_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in done.stderr
    assert errors[0].startswith(f"error: model endpoint {behaving.url} answered HTTP 502 after 3 attempts")
    assert TEST_KEY not in done.stdout + done.stderr
    assert not (study.results_dir / "runs").exists()
