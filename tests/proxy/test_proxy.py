"""The deletion proxy end to end, against an in-process test double of the model server
(``forgetting_testkit/fakes/openai_upstream.py``), for both message styles."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading

import pytest

from forgetting.deletion import reduce_history
from forgetting.foundation.errors import RunOutputError
from forgetting.grid import paper_configuration
from forgetting.prompt import chat_format
from forgetting.records.calllog import read_call_log
from forgetting.run.proxy import ProxySettings, start_proxy
from forgetting.run.proxy.upstream import Upstream
from forgetting_testkit.checkout import cli_env
from forgetting_testkit.fakes.openai_upstream import FakeUpstream
from forgetting_testkit.histories import ACTIONS, SYSTEM, TASK
from forgetting_testkit.proxy_client import FAST, TOOLS, drive, request

#: the schema's proxy settings
PROXY_DEFAULTS = ProxySettings.from_parts()


@pytest.mark.parametrize("style", ["tool_calls", "text"])
@pytest.mark.parametrize("name", ["delayed-turn-both-50", "immediate-token-tool_output-50", "baseline"])
def test_end_to_end(tmp_path, style, name):
    d, seed, run = paper_configuration(name), 41, f"mini/{name}/task-1/1"
    with (
        FakeUpstream(style=style) as up,
        start_proxy(up.url, d, seed, tmp_path, run, settings=FAST, actions=ACTIONS[style]) as px,
    ):
        assert px.host == "127.0.0.1" and px.url.endswith("/v1")
        sent = drive(px.url, style, 7)
    received = up.chat_requests()
    assert len(received) == 7
    log = read_call_log(tmp_path / "calls.jsonl")
    assert not log.torn and len(log.calls) == 7 and not log.failed
    assert (log.header["run_id"], log.header["seed"], log.header["deletion"]["name"]) == (run, seed, name)
    all_deleted = []
    for k, (history, rec, call) in enumerate(zip(sent, received, log.calls, strict=True), start=1):
        expected = reduce_history(history, d, seed, actions=ACTIONS[style])
        # upstream got the reduced messages, everything else as the agent sent it
        assert rec.body["messages"] == expected.messages
        assert {k2: v for k2, v in rec.body.items() if k2 != "messages"} == {
            "model": "qwen3-coder",
            "temperature": 0,
            "max_tokens": 512,
            **({"tools": TOOLS} if style == "tool_calls" else {}),
        }
        assert rec.headers["X-Forgetting-Run"] == run and rec.headers["X-Forgetting-Seed"] == str(seed)
        assert rec.headers["Authorization"] == "Bearer sk-test"
        # the call log holds exactly what the cost stage needs
        assert call.index == k
        assert log.messages(call) == expected.messages
        tools = TOOLS if style == "tool_calls" else None
        assert log.prompt_ids(call) == chat_format.prompt_token_ids(expected.messages, tools)
        assert call.deleted == expected.deleted
        assert call.params == {"model": "qwen3-coder", "temperature": 0, "max_tokens": 512}
        assert call.usage.cached_tokens == 16 * (k - 1)  # the upstream usage, parsed (usage.raw: as sent)
        assert call.response["finish_reason"] == ("tool_calls" if style == "tool_calls" else "stop")
        assert call.t_request <= call.t_response
        all_deleted += call.deleted
    final = reduce_history(sent[-1], d, seed, actions=ACTIONS[style])
    if name == "baseline":
        assert all(r.body["messages"] == h for r, h in zip(received, sent, strict=True)) and not all_deleted
    else:
        assert final.records and sorted(all_deleted, key=lambda r: r.identity) == sorted(
            final.records, key=lambda r: r.identity
        )


def test_upstream_error_is_passed_through_without_retry(tmp_path):
    with (
        FakeUpstream() as up,
        start_proxy(
            up.url, paper_configuration("delayed-turn-both-100"), 1, tmp_path, "r", settings=FAST, actions=None
        ) as px,
    ):
        error = {
            "error": {
                "message": "This model's maximum context length is 262144 tokens.",
                "type": "BadRequestError",
                "code": 400,
            }
        }
        up.fail_next(400, body=error)
        status, body = request(
            px.url, "POST", "/v1/chat/completions", {"model": "m", "messages": [SYSTEM, TASK]}
        )
        assert (status, body) == (400, error)
        assert len(up.chat_requests()) == 1
        drive(px.url, "tool_calls", 1)
    log = read_call_log(tmp_path / "calls.jsonl")
    assert [c.index for c in log.calls] == [1]
    (failed,) = log.failed
    assert failed["status"] == 400 and failed["attempts"] == 1 and failed["index"] is None


def test_transient_failures_are_retried(tmp_path):
    with (
        FakeUpstream() as up,
        start_proxy(up.url, paper_configuration("baseline"), 1, tmp_path, "r", settings=FAST, actions=None) as px,
    ):
        up.fail_next(503, times=2)
        up.fail_next(None)  # connection dropped without a reply
        up.fail_next(429, retry_after="0")
        status, body = request(
            px.url, "POST", "/v1/chat/completions", {"model": "m", "messages": [SYSTEM, TASK]}
        )
        assert status == 200 and body["choices"][0]["message"]["tool_calls"]
        assert len(up.chat_requests()) == 5
    (call,) = read_call_log(tmp_path / "calls.jsonl").calls
    assert call.attempts == 5


def test_retries_give_up_with_the_upstream_status(tmp_path):
    settings = ProxySettings.from_parts({"retries": 2, "backoff_s": 0.01, "backoff_max_s": 0.02})
    with (
        FakeUpstream() as up,
        start_proxy(up.url, paper_configuration("baseline"), 1, tmp_path, "r", settings=settings, actions=None) as px,
    ):
        up.fail_next(503, times=10, body=b"Service Unavailable")
        status, body = request(
            px.url, "POST", "/v1/chat/completions", {"model": "m", "messages": [SYSTEM, TASK]}
        )
    assert status == 503 and len(up.chat_requests()) == 3
    assert body["error"]["message"] == "upstream returned HTTP 503: Service Unavailable"
    assert body["error"]["code"] == 503
    assert read_call_log(tmp_path / "calls.jsonl").failed[0]["attempts"] == 3


def test_unreachable_upstream_is_a_502_with_a_message(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    settings = ProxySettings.from_parts({"retries": 1, "backoff_s": 0.01})
    with start_proxy(
        f"http://127.0.0.1:{port}", paper_configuration("baseline"), 1, tmp_path, "r", settings=settings, actions=None
    ) as px:
        status, body = request(
            px.url, "POST", "/v1/chat/completions", {"model": "m", "messages": [SYSTEM, TASK]}
        )
    assert status == 502 and "unreachable" in body["error"]["message"]


def test_a_slow_upstream_times_out_without_retry(tmp_path):
    with (
        FakeUpstream() as up,
        start_proxy(
            up.url,
            paper_configuration("baseline"),
            1,
            tmp_path,
            "r",
            settings=ProxySettings.from_parts({"timeout_s": 0.2, "backoff_s": 0.01}), actions=None,
        ) as px,
    ):
        up.delay_s = 0.5
        status, body = request(
            px.url, "POST", "/v1/chat/completions", {"model": "m", "messages": [SYSTEM, TASK]}
        )
        assert status == 504 and "did not answer within 0.2 s" in body["error"]["message"]
        assert len(up.chat_requests()) == 1


def test_retry_after_is_honoured_beyond_the_backoff_cap_within_the_wait_budget():
    waits: list[float] = []
    with FakeUpstream() as up:
        client = Upstream(up.url, retries=3, backoff_s=0.01, backoff_max_s=0.5, max_wait_s=60, sleep=waits.append)
        up.fail_next(429, retry_after="0.3")
        up.fail_next(429, retry_after="30")
        up.fail_next(502)
        reply = client.request("GET", "/models")
        client.close()
    assert reply.ok and reply.attempts == 4
    assert waits == [0.3, 30.0, 0.04]


def test_malformed_requests_get_a_4xx_with_a_message(tmp_path):
    with (
        FakeUpstream() as up,
        start_proxy(up.url, paper_configuration("baseline"), 1, tmp_path, "r", settings=FAST, actions=None) as px,
    ):
        cases = [
            (b"{not json", 400, "not valid JSON"),
            ({"model": "m"}, 400, "'messages' must be a non-empty list"),
            ({"model": "m", "messages": [SYSTEM, "hi"]}, 400, "messages[1] is a string, expected an object"),
            ({"model": "m", "messages": [{"content": "x"}]}, 400, "messages[0].role is missing, expected a string"),
            ({"model": "m", "messages": [SYSTEM], "tools": {}}, 400, "tools is an object, expected a list"),
        ]
        for body, status, fragment in cases:
            got, reply = request(px.url, "POST", "/v1/chat/completions", body)
            assert got == status and fragment in reply["error"]["message"]
        assert request(px.url, "GET", "/v1/chat/completions")[0] == 405
        assert request(px.url, "POST", "/v1/embeddings", {"input": "x"})[0] == 404
        host, port = px.host, px.port
        with socket.create_connection((host, port)) as s:  # a body without Content-Length
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert s.recv(100).startswith(b"HTTP/1.1 411")
        assert not up.chat_requests()
    assert read_call_log(tmp_path / "calls.jsonl").calls == []


def test_models_and_health(tmp_path):
    with (
        FakeUpstream() as up,
        start_proxy(
            up.url, paper_configuration("immediate-token-both-25"), 9, tmp_path, "mini/x/t/1", settings=FAST,
            actions=None,
        ) as px,
    ):
        status, models = request(px.url, "GET", "/v1/models")
        assert status == 200 and models["data"][0]["id"] == "fake"
        drive(px.url, "text", 2)
        status, health = request(px.url, "GET", "/health")
    assert status == 200
    assert health == {
        "status": "ok",
        "run_id": "mini/x/t/1",
        "deletion": "immediate-token-both-25",
        "seed": 9,
        "upstream": up.url,
        "calls": 2,
        "failed_calls": 0,
    }


def test_openai_client_with_and_without_streaming(tmp_path):
    openai = pytest.importorskip("openai")
    with (
        FakeUpstream() as up,
        start_proxy(
            up.url, paper_configuration("immediate-turn-tool_output-100"), 2, tmp_path, "r", settings=FAST, actions=None
        ) as px,
    ):
        client = openai.OpenAI(base_url=px.url, api_key="sk-test", max_retries=0)
        plain = client.chat.completions.create(model="m", messages=[SYSTEM, TASK], tools=TOOLS)
        call = plain.choices[0].message.tool_calls[0]
        assert call.function.name == "bash" and json.loads(call.function.arguments)["command"]
        chunks = list(
            client.chat.completions.create(
                model="m",
                messages=[SYSTEM, TASK],
                tools=TOOLS,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        assert "stream" not in up.chat_requests()[-1].body  # asked upstream without streaming
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert deltas[0].content.startswith("THOUGHT: step 2")
    assert deltas[0].tool_calls[0].function.name == "bash"
    assert chunks[1].choices[0].finish_reason == "tool_calls"
    assert chunks[-1].usage.completion_tokens == 30
    log = read_call_log(tmp_path / "calls.jsonl")
    assert len(log.calls) == 2 and log.calls[1].params["stream"] is True


#: how long a test waits for a proxy process to exit: only a guard against a hang, never a
#: measure of speed (a loaded machine may take many seconds to schedule it)
EXIT_WAIT_S = 300


def _start_cli(args: list[str]) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "forgetting", "proxy", *args],
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    assert line.startswith("forgetting proxy: http://127.0.0.1:"), (
        line,
        proc.stderr.read() if proc.poll() else "",
    )
    return proc, line.split()[2]


def test_the_proxys_stop_is_bounded_even_when_a_handler_is_stuck_holding_the_call_log(tmp_path):
    """A handler stuck mid-write (a hung file system) holds the call log: the stop still returns
    within its bound, says it gave up, and what was answered is on disk (issue 25: a proxy not
    exited 10 s after SIGTERM on a loaded machine)."""
    from forgetting.run.proxy.server import STOP_TIMEOUT_S

    with FakeUpstream(style="text") as up:
        px = start_proxy(up.url, paper_configuration("baseline"), 3, tmp_path, "mini-text/baseline/t/1",
                         actions=ACTIONS["text"], settings=FAST)
        drive(px.url, "text", 2)
        px.server.log._lock.acquire()  # what a handler blocked inside a write holds
        try:
            result: list[bool] = []
            stopper = threading.Thread(target=lambda: result.append(px.stop()), daemon=True)
            stopper.start()
            stopper.join(STOP_TIMEOUT_S + EXIT_WAIT_S)
            assert not stopper.is_alive(), "stop() did not return"
            assert result == [False]  # it gave up on the stuck step, and says so
        finally:
            px.server.log._lock.release()
    assert len(read_call_log(tmp_path / "calls.jsonl").calls) == 2  # every answered call on disk


def test_killed_proxy_loses_nothing_logged_and_a_torn_line_is_reported(tmp_path):
    log_dir = tmp_path / "run"
    path = log_dir / "calls.jsonl"
    with FakeUpstream(style="text") as up:
        args = [
            "--upstream",
            up.url,
            "--deletion",
            "delayed-turn-tool_output-100",
            "--seed",
            "3",
            "--log",
            str(log_dir),
            "--agent",
            "mini-text",
            "--run-id",
            "mini-text/delayed-turn-tool_output-100/t/1",
        ]
        proc, url = _start_cli(args)
        drive(url, "text", 4)
        os.kill(proc.pid, signal.SIGKILL)  # no chance to flush or close anything
        proc.wait(EXIT_WAIT_S)
        log = read_call_log(path)
        assert len(log.calls) == 4 and not log.torn  # every answered call was on disk first
        assert log.header["actions"] == ACTIONS["text"].to_json()  # mini-swe-agent's own action_regex
        # a kill in the middle of writing a record leaves part of a line: cut the last one short
        data = path.read_bytes()
        path.write_bytes(data[: data.rstrip(b"\n").rfind(b"\n") + 1 + 40])
        with pytest.raises(RunOutputError, match=r"line \d+ is torn"):
            read_call_log(path)  # a torn log is an error unless the reader asks for its prefix
        log = read_call_log(path, allow_torn=True)
        assert log.torn and log.torn_line == 14 and len(log.calls) == 3
        # the same run restarted resumes the log: the torn tail is cut, numbering goes on
        proc, url = _start_cli(args)
        drive(url, "text", 1)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=EXIT_WAIT_S)  # the stop is bounded by design (ProxyHandle.stop)
        assert proc.returncode == 0 and "stopped after 1 calls" in out
        log = read_call_log(path, allow_torn=False)
        assert [c.index for c in log.calls] == [1, 2, 3, 4]
        # another run's proxy refuses the log
        bad = subprocess.run(
            [sys.executable, "-m", "forgetting", "proxy", *args[:-1], "other/run/t/1"],
            env=cli_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert bad.returncode == 2 and bad.stderr.count("\n") == 1
        assert "belongs to run_id 'mini-text/delayed-turn-tool_output-100/t/1'" in bad.stderr


def test_cli_rejects_an_unknown_configuration(run_cli, tmp_path):
    proc = run_cli(
        "proxy",
        "--upstream",
        "http://127.0.0.1:9/v1",
        "--deletion",
        "delayed-turn-thoughts-50",
        "--seed",
        "1",
        "--log",
        tmp_path,
        "--agent",
        "mini",
    )
    assert proc.returncode == 2
    assert (
        proc.stderr == "error: --deletion: unknown scope 'thoughts' in 'delayed-turn-thoughts-50'; "
        "allowed values: reasoning, tool_output, both\n"
    )


def test_cli_resolves_names_from_a_study_config(tmp_path, repo_root):
    import yaml

    from forgetting.commands.proxy import resolve_deletion
    from forgetting.study.config import load_study

    cfg = yaml.safe_load((repo_root / "config" / "config.yaml").read_text())
    cfg["configurations"] = {
        "names": "none",
        "policies": [
            {
                "name": "delayed8-token-both-40",
                "policy": "random",
                "scope": "both",
                "granularity": "token",
                "amount": 40,
                "keep_last": 8,
            }
        ],
    }
    cfg["deletion"] = {"token_draw": "bernoulli", "placeholders": {"reasoning": "[gone]"}}
    # a text-mode config of one's own: its model.action_regex is what counts as an action
    mini_text = tmp_path / "my_backticks.yaml"
    mini_text.write_text(yaml.safe_dump({"agent": {}, "model": {"action_regex": r"<cmd>(.*?)</cmd>"}}))
    cfg.setdefault("agent", {})["mini-text"] = {"config_file": str(mini_text)}
    for section, key in (("tasks", "ids_file"), ("dataset", "known_ids"), ("dataset", "instances")):
        cfg[section][key] = str(repo_root / cfg[section][key])
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(cfg))
    study = load_study(path)
    assert resolve_deletion("delayed8-token-both-40", study).keep_last == 8
    assert resolve_deletion("delayed-turn-both-50", study).amount == 50  # the paper's names still resolve
    settings = study.proxy
    assert settings.deletion.token_draw == "bernoulli"
    assert settings.deletion.placeholders == {"reasoning": "[gone]", "tool_output": "[tool output deleted]"}
    from forgetting.commands.proxy import agent_actions

    custom = agent_actions("mini-text", study)
    assert (custom.regex, custom.source) == (r"<cmd>(.*?)</cmd>", f"{mini_text}: model.action_regex")
    assert agent_actions("mini-text", None) == ACTIONS["text"]  # mini-swe-agent's own default
    assert agent_actions("mini", study) is None and agent_actions("trae", study) is None


def test_start_proxy_refuses_a_busy_port(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        from forgetting.foundation.errors import UserError

        with pytest.raises(UserError, match=r"cannot listen on 127\.0\.0\.1"):
            start_proxy(
                "http://127.0.0.1:9/v1",
                paper_configuration("baseline"),
                1,
                tmp_path,
                "r",
                port=s.getsockname()[1], actions=None, settings=PROXY_DEFAULTS
            )


def test_proxy_settings_defaults_match_the_config_schema():
    from forgetting.study.config import load_schema

    props = load_schema()["properties"]["execution"]["properties"]["proxy"]["properties"]
    defaults = ProxySettings.from_parts().as_dict()
    assert {k: v["default"] for k, v in props.items()} == {k: defaults[k] for k in props}
