"""The proxy's upstream client as an endpoint needs it: Retry-After in both of its forms, a
bounded and jittered backoff, the API key sent in place of the agent's and never let back
in, a reply that is no JSON, and the limits the runs of a batch share across processes
(request slots, the pause after a 429). The upstream is the OpenAI test double (no model
server here) or the named fake provider."""

from __future__ import annotations

import email.utils
import json
import os
import signal
import time

import pytest

from forgetting.run.proxy.shared_limits import SharedLimits
from forgetting.run.proxy.upstream import REDACTED, Access, Upstream, retry_after_s
from forgetting_testkit.fakes.openai_upstream import FakeUpstream
from forgetting_testkit.fakes.provider import FakeProvider, Rule

KEY = "sk-test-upstream-7f3a9c"


def test_retry_after_reads_seconds_and_http_dates():
    now = 1_800_000_000.0
    assert retry_after_s("7", now) == 7.0
    assert retry_after_s(" 0.25 ", now) == 0.25
    assert retry_after_s(email.utils.formatdate(now + 30, usegmt=True), now) == pytest.approx(30, abs=1)
    assert retry_after_s(email.utils.formatdate(now - 30, usegmt=True), now) == 0.0  # in the past: now
    assert retry_after_s("-3", now) == 0.0
    for unreadable in (None, "", "soon", "nan", "inf"):
        assert retry_after_s(unreadable, now) is None


def test_an_http_date_retry_after_is_waited_for():
    waits: list[float] = []
    with FakeUpstream() as up:
        client = Upstream(up.url, retries=2, backoff_s=0.01, max_wait_s=60, sleep=waits.append)
        up.fail_next(429, retry_after=email.utils.formatdate(time.time() + 20, usegmt=True))
        reply = client.request("GET", "/models")
        client.close()
    assert reply.ok and reply.attempts == 2
    assert waits == [pytest.approx(20, abs=1.5)]


def test_backoff_is_capped_exponential_with_a_jitter_drawn_from_the_seed():
    def waits_of(seed: int) -> list[float]:
        client = Upstream("http://127.0.0.1:9/v1", backoff_s=1.0, backoff_max_s=5.0, jitter=0.5, jitter_seed=seed)
        return [client.backoff(attempt, request) for request in (1, 2) for attempt in (1, 2, 3, 4, 5)]

    first = waits_of(11)
    caps = [1.0, 2.0, 4.0, 5.0, 5.0] * 2
    assert all(cap * 0.5 <= w <= cap for w, cap in zip(first, caps, strict=True))
    assert first == waits_of(11)  # a rerun waits the same
    assert first != waits_of(12)  # another run does not retry in step
    assert len(set(first)) == len(first)
    no_jitter = Upstream("http://127.0.0.1:9/v1", backoff_s=1.0, backoff_max_s=5.0, jitter=0.0)
    assert [no_jitter.backoff(a, 1) for a in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 5.0]


def test_the_waits_of_one_request_stay_within_max_wait_s():
    waits: list[float] = []
    with FakeUpstream() as up:
        client = Upstream(up.url, retries=10, backoff_s=1.0, backoff_max_s=4.0, max_wait_s=10, sleep=waits.append)
        up.fail_next(503, times=20)
        reply = client.request("GET", "/models")
        assert sum(waits) <= 10 and waits == [1.0, 2.0, 4.0]  # a fourth wait (4 s) would pass 10 s
        assert reply.status == 503 and reply.attempts == 4 and reply.waited_s == 7.0
        assert "execution.proxy.max_wait_s" in (reply.gave_up or "")
        # a Retry-After beyond the budget is not waited for at all
        waits.clear()
        up.failures.clear()
        up.fail_next(429, retry_after="3600")
        reply = client.request("GET", "/models")
        client.close()
    assert waits == [] and reply.status == 429 and reply.attempts == 1
    assert "kept answering HTTP 429" in (client.failure or "") and client.url in (client.failure or "")


def test_the_key_goes_upstream_in_place_of_the_agents_and_never_comes_back():
    with FakeUpstream() as up:
        client = Upstream(up.url, access=Access(api_key=KEY, key_name="THE_KEY"))
        reply = client.request("POST", "/chat/completions", json.dumps({"messages": []}).encode(),
                               {"Authorization": "Bearer not-needed", "Content-Type": "application/json"})
        assert reply.ok
        (sent,) = up.chat_requests()
        assert [v for k, v in sent.headers.items() if k.lower() == "authorization"] == [f"Bearer {KEY}"]
        # a provider that repeats the key in an error: replaced before anyone sees it
        up.fail_next(401, body={"error": {"message": f"Incorrect API key provided: {KEY}"}})
        reply = client.request("GET", "/models")
        client.close()
    assert KEY.encode() not in reply.body and REDACTED.encode() in reply.body
    assert KEY not in (client.failure or "") and "refused the API key in $THE_KEY (HTTP 401" in (client.failure or "")
    assert KEY not in repr(client.access)


def test_a_reply_that_is_no_json_is_a_502_naming_the_server_and_not_retried(tmp_path):
    with FakeUpstream() as model, FakeProvider(model.url, key=KEY) as provider:
        provider.misbehave(Rule("non_json", times=1))
        client = Upstream(provider.url, retries=3, backoff_s=0.01, access=Access(api_key=KEY))
        reply = client.request("GET", "/models")
        client.close()
    assert not reply.ok and reply.status == 502 and reply.attempts == 1
    assert reply.error == f"model server {client.url} answered HTTP 200 with text/html, not JSON"
    assert "is the base URL the server's OpenAI API root" in (client.failure or "")


def test_a_later_success_clears_the_failure():
    with FakeUpstream() as up:
        client = Upstream(up.url, retries=0)
        up.fail_next(503)
        assert not client.request("GET", "/models").ok and client.failure
        assert client.request("GET", "/models").ok and client.failure is None
        up.fail_next(400)  # the request's fault, not the server's
        assert client.request("GET", "/models").status == 400 and client.failure is None
        client.close()


# ------------------------------------------------------------------ limits shared across processes


def _in_children(n: int, body) -> None:
    """Run ``body(i)`` in ``n`` forked processes at once; wait for them all (each must exit 0)."""
    pids = []
    for i in range(n):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                body(i)
                code = 0
            finally:
                os._exit(code)
        pids.append(pid)
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0


def test_request_slots_bound_the_requests_in_flight_across_processes(tmp_path):
    limits = SharedLimits(tmp_path / "limits", max_in_flight=2)
    with FakeUpstream() as up:
        up.delay_s = 0.15

        def requests(i: int) -> None:
            client = Upstream(up.url, access=Access(shared=limits))
            for _ in range(2):
                assert client.request("POST", "/chat/completions", b'{"messages": []}').ok
            client.close()

        _in_children(5, requests)
        assert up.completions == 10 and up.max_in_flight == 2
        # without the limit the same five processes press harder
        up.max_in_flight = 0
        up.delay_s = 0.5
        _in_children(5, lambda i: Upstream(up.url).request("POST", "/chat/completions", b'{"messages": []}'))
    assert up.max_in_flight > 2


def test_a_killed_request_releases_its_slot(tmp_path):
    limits = SharedLimits(tmp_path / "limits", max_in_flight=1)
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        with limits.slot():
            os.write(ready_w, b"x")
            time.sleep(60)
        os._exit(0)
    os.read(ready_r, 1)
    assert limits.in_flight() == 1
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    assert limits.in_flight() == 0
    with limits.slot():  # free at once
        assert limits.in_flight() == 1


def test_a_429_holds_back_the_other_runs_of_the_batch(tmp_path):
    limits = SharedLimits(tmp_path / "limits")
    with FakeUpstream() as up:
        up.fail_next(429, retry_after="1.5")
        first = Upstream(up.url, retries=2, backoff_s=0.01, max_wait_s=30, access=Access(shared=limits))
        t0 = time.time()
        assert first.request("POST", "/chat/completions", b'{"messages": []}').ok
        # paused from the 429 on for Retry-After's 1.5 s, which the first request waited out itself
        assert t0 + 1.5 <= limits.paused_until() <= time.time()
        # another run's request, a moment later: it waits out the pause before it is sent
        second = Upstream(up.url, access=Access(shared=limits))
        assert second.request("POST", "/chat/completions", b'{"messages": []}').ok
        first.close()
        second.close()
    assert up.arrivals[-1] >= limits.paused_until() - 0.01
    limits.pause_until(0.0)  # an earlier pause never shortens a later one
    assert limits.paused_until() > t0
