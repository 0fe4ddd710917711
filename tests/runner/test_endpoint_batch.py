"""Batches of real mini-swe-agent runs against an endpoint (``model.backend: endpoint``): the
named fake provider (a test double for a hosted provider, with a key and its own prompt-cache
rules) in front of the scripted stand-in or the vLLM test double, each a process of its own.

The key reaches the provider and nothing else: no file the batch writes, no log, and not the
agents' environment (an agent that runs ``env`` does not see it); the requests in flight
across the batch's runs stay within ``max_concurrent_requests``; and an endpoint that breaks
mid-batch loses no finished run — the batch fails in one line naming the endpoint, and the
next invocation, once the endpoint is fixed, finishes the rest and leaves the finished runs
byte- and mtime-identical.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from forgetting.foundation.layout import CALLS, RUN_JSON, TRAJECTORY, Layout
from forgetting.records.calllog import read_call_log
from forgetting.run import run_batch
from forgetting.study.config import load_study
from forgetting_testkit.checkout import ROOT
from forgetting_testkit.endpoints import (
    KEY_ENV,
    TEST_KEY,
    endpoint_model,
    fake_vllm,
    files_holding,
    key_env,
    provider,
    scripted_model,
)
from forgetting_testkit.fakes.provider import Rule, aligned
from forgetting_testkit.runner import batch_of, run_dir, run_json, snapshot, study_at, write_study

pytestmark = pytest.mark.slow

FAST = {"retries": 2, "backoff_s": 0.01, "backoff_max_s": 0.05, "max_wait_s": 5}


def test_the_key_reaches_the_provider_and_nothing_else(tmp_path, monkeypatch):
    # the model asks every run to print its environment, then submits: whatever the agent's
    # shell could see ends up in the trajectory and the call log
    env = {"FAKE_VLLM_COMMAND": "env | sort", "FAKE_VLLM_SUBMIT_AT": "3"}
    with fake_vllm(tmp_path, env) as model, provider(tmp_path, model, style="deepseek") as fake:
        monkeypatch.setenv(KEY_ENV, TEST_KEY)
        study = study_at(
            tmp_path, model=endpoint_model(fake.url, served_name="fake", max_concurrent_requests=1),
            repeats={"baseline": 3, "deletion": 1},
            execution={"concurrency": 3, "scratch_dir": str(tmp_path / "scratch"), "proxy": FAST},
        )
        batch = batch_of(study, "mini", "baseline")
        log = tmp_path / "batch.log"
        document = run_batch(study, batch, log=log, echo=False)
        stats = fake.stats()
    assert set(e["status"] for e in document["runs"].values()) == {"submitted"}
    assert stats["auth_failures"] == 0 and stats["requests"]["POST /v1/chat/completions"] == 9
    assert stats["max_in_flight"] == 1  # three runs at once, one request at a time
    rid = batch.runs[0].run_id
    traj = (run_dir(study, rid) / TRAJECTORY).read_text()
    assert "PATH=" in traj and KEY_ENV not in traj  # the agent ran env; the key's variable was not there
    record = run_json(study, rid)
    assert record["model_backend"] == "endpoint"  # no stand-in behind it
    assert record["versions"]["model"]["backend"] == "endpoint" and record["versions"]["model"]["endpoint"] == fake.url
    log_ = read_call_log(run_dir(study, rid) / CALLS)
    assert log_.header["upstream"] == fake.url
    # the provider's own usage, as reported (DeepSeek's fields), parsed into the typed record
    assert all(c.usage.cached_field == "prompt_cache_hit_tokens" and "prompt_cache_miss_tokens" in c.usage.raw
               for c in log_.calls)
    # the key is in no file of the study, its log, the batch's model-server log or anywhere in tmp
    assert files_holding(TEST_KEY, study.results_dir, tmp_path) == []
    assert files_holding(TEST_KEY, tmp_path / "scratch") == []


def test_the_scripted_stand_in_behind_a_provider_is_labelled_as_the_stand_in(tmp_path, monkeypatch):
    with scripted_model(tmp_path) as model, provider(tmp_path, model, style="openai") as fake:
        monkeypatch.setenv(KEY_ENV, TEST_KEY)
        study = study_at(tmp_path, model=endpoint_model(fake.url),
                         execution={"concurrency": 1, "scratch_dir": str(tmp_path / "scratch"), "proxy": FAST})
        batch = batch_of(study, "mini", "baseline")
        run_batch(study, batch, echo=False)
    rid = batch.runs[0].run_id
    record = run_json(study, rid)
    assert record["status"] == "submitted" and record["model_backend"] == "scripted"
    assert record["versions"]["model"]["note"] == "scripted stand-in for the LLM"
    assert record["versions"]["model"]["served_by"] == "forgetting-scripted-stand-in-v1"
    calls = read_call_log(run_dir(study, rid) / CALLS).calls
    # the provider's cache rule, not the stand-in's emulated vLLM cache: whole 128-token blocks past 1,024
    assert all(c.usage.cached_field == "prompt_tokens_details.cached_tokens" for c in calls)
    cached = [c.usage.cached_tokens for c in calls]
    assert all(c == 0 or (c >= 1024 and (c - 1024) % 128 == 0) for c in cached) and max(cached) >= 1024
    assert all(c <= aligned(u.usage.prompt_tokens) for c, u in zip(cached, calls, strict=True))


def _wait_for(predicate, process: subprocess.Popen, timeout_s: float = 180) -> None:
    end = time.monotonic() + timeout_s
    while not predicate():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def test_an_endpoint_that_breaks_mid_batch_loses_no_finished_run_and_the_rest_resume(tmp_path):
    with scripted_model(tmp_path) as model, provider(tmp_path, model) as fake:
        config = write_study(tmp_path, model=endpoint_model(fake.url), repeats={"baseline": 3, "deletion": 1},
                             execution={"concurrency": 1, "scratch_dir": str(tmp_path / "scratch"), "proxy": FAST})
        study = load_study(config)
        batch = batch_of(study, "mini", "baseline")
        first, second, third = (r.run_id for r in batch.runs)
        cmd = [sys.executable, "-m", "forgetting", "run-batch", str(config), "--batch", batch.key]
        process = subprocess.Popen(cmd, cwd=ROOT, env=key_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
        _wait_for(lambda: (run_dir(study, first) / RUN_JSON).is_file(), process)
        fake.misbehave(Rule("unauthorized"))  # the key is revoked while the second run goes on
        out, err = process.communicate(timeout=300)
        assert process.returncode == 2, err
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "Traceback" not in err
        (line,) = errors
        assert f"2 of 3 runs did not finish and will be redone by the next invocation: model endpoint {fake.url} " \
               f"refused the API key in ${KEY_ENV} (HTTP 401: Your API key has been revoked)" in line
        assert second in line and third in line and TEST_KEY not in out + err
        # the second run stopped on the 401: not recorded as a result of the agent
        assert not run_dir(study, second).exists() and not run_dir(study, third).exists()
        before = snapshot(run_dir(study, first))

        fake.behave()  # fixed
        done = subprocess.run(cmd, cwd=ROOT, env=key_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "1 of 3 runs finished before; kept" in done.stderr
    manifest = json.loads((Layout(study.results_dir).batch_dir(batch.key) / "runs.json").read_text())
    assert {rid: e["status"] for rid, e in manifest["runs"].items()} == dict.fromkeys((first, second, third),
                                                                                      "submitted")
    assert snapshot(run_dir(study, first)) == before  # bytes and mtimes
    assert files_holding(TEST_KEY, study.results_dir, tmp_path) == []
