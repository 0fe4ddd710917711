"""The scripted model over HTTP and on the command line, and the usage it reports."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from forgetting.demo.scripted import SEED_HEADER, ScriptedModelServer
from forgetting.prompt import chat_format
from forgetting_testkit import scripted as S
from forgetting_testkit.checkout import cli_env
from forgetting_testkit.naive_cost import lcp_tokens


def http(url: str, body: dict[str, Any] | None = None, headers: dict[str, str] | None = None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_usage_counts_real_tokens_and_emulates_the_prefix_cache(tmp_path: Path) -> None:
    model = S.model()
    run = S.drive(model, S.checkout(tmp_path / "repo"), style="tool_calls")
    # replay the same run's requests against a fresh model (an empty cache)
    fresh = S.model()
    prompts: list[list[int]] = []
    for k, sent in enumerate(run.sent):
        response = fresh.complete({"messages": sent, "tools": [S.BASH_TOOL]})
        usage = response["usage"]
        prompt = chat_format.prompt_token_ids(sent, [S.BASH_TOOL])
        completion = chat_format.completion_token_ids(response["choices"][0]["message"])
        assert usage["prompt_tokens"] == len(prompt)
        assert usage["completion_tokens"] == len(completion)
        assert usage["total_tokens"] == len(prompt) + len(completion)
        # by hand: the longest prefix shared with an earlier prompt, in whole 16-token blocks,
        # never counting the prompt's last token
        shared = max((lcp_tokens(prompt, p) for p in prompts), default=0)
        expected = 16 * (min(shared, len(prompt) - 1) // 16)
        assert usage["prompt_tokens_details"]["cached_tokens"] == expected, k
        prompts.append(prompt)
    assert run.responses[-1]["usage"]["prompt_tokens_details"]["cached_tokens"] > 0


def test_each_run_meets_its_own_prefix_cache_unless_shared(tmp_path: Path) -> None:
    from forgetting.demo.scripted.settings import ScriptedSettings

    first = S.start_messages("tool_calls")
    request = {"messages": first, "tools": [S.BASH_TOOL]}
    for per_run, second_run_hits in ((True, False), (False, True)):
        model = S.model(settings=ScriptedSettings.from_mapping({"cache_per_run": per_run}))
        cached = [
            model.complete(request, seed)["usage"]["prompt_tokens_details"]["cached_tokens"]
            for seed in ("11", "11", "22")
        ]
        assert cached[0] == 0 and cached[1] > 0  # the same run: its earlier prompt hits
        assert (cached[2] > 0) == second_run_hits  # another run: only a shared cache hits


def test_max_tokens_cuts_the_reply_short() -> None:
    messages = S.start_messages("tool_calls")
    response = S.model().complete({"messages": messages, "tools": [S.BASH_TOOL], "max_tokens": 5})
    choice = response["choices"][0]
    assert choice["finish_reason"] == "length" and "tool_calls" not in choice["message"]
    assert response["usage"]["completion_tokens"] == 5


def test_http_endpoints_and_the_seed_header(tmp_path: Path) -> None:
    messages = S.start_messages("text")
    with ScriptedModelServer(S.TASKS, settings=S.ScriptedSettings.from_mapping()) as server:
        assert server.url == f"http://127.0.0.1:{server.port}/v1"
        status, health = http(server.root_url + "/health")
        assert status == 200 and health["status"] == "ok" and "stand-in" in health["stand_in"]
        status, models = http(server.url + "/models")
        assert status == 200 and models["data"][0]["id"] == "scripted"
        assert "stand-in" in models["data"][0]["description"]
        replies = {}
        for header in ("run-1", "run-2", None):
            status, body = http(
                server.url + "/chat/completions",
                {"model": "scripted", "messages": messages},
                {SEED_HEADER: header} if header else {},
            )
            assert status == 200
            assert (
                body["model"] == "scripted"
                and body["system_fingerprint"] == "forgetting-scripted-stand-in-v1"
            )
            replies[header] = body["choices"][0]["message"]
        # the same as in process with the same run key
        for header, message in replies.items():
            in_process = S.model(S.ScriptedSettings.from_mapping()).complete({"messages": messages}, header)
            assert in_process["choices"][0]["message"] == message
        status, err = http(server.url + "/chat/completions", {"messages": []})
        assert status == 400 and "messages" in err["error"]["message"]
        status, err = http(server.url + "/chat/completions", {"messages": messages, "stream": True})
        assert status == 400 and "streaming" in err["error"]["message"]
        status, err = http(server.url + "/nowhere")
        assert status == 404
    with pytest.raises(OSError):
        http(server.root_url + "/health")


def test_cli_serves_until_terminated(tmp_path: Path) -> None:
    port_file = tmp_path / "port"
    proc = subprocess.Popen(
        [sys.executable, "-m", "forgetting", "scripted-model", "--tasks", str(S.TASKS), "--seed", "5",
         "--port-file", str(port_file)],
        env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert port_file.exists(), proc.stderr.read() if proc.poll() is not None else "no port file"
        port = int(port_file.read_text())
        status, _ = http(f"http://127.0.0.1:{port}/health")
        assert status == 200
        status, body = http(
            f"http://127.0.0.1:{port}/v1/chat/completions", {"messages": S.start_messages("text")}
        )
        assert status == 200 and body["scripted_stand_in"]["task"] == S.TASK_ID
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "stand-in for an LLM" in out and "seed 5" in out


def test_cli_rejects_a_missing_tasks_dir(run_cli, tmp_path: Path) -> None:
    result = run_cli("scripted-model", "--tasks", tmp_path / "nope")
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and "no such tasks directory" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
