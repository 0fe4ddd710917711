"""Added latency of the deletion proxy per model call, on a history growing to ~100k tokens.

An agent-like client sends a mini-swe-agent-style history (tool calls, ``nl``/``sed``
outputs of code) that grows call by call to about 100k tokens, once straight to an
OpenAI-compatible upstream and once through the proxy in front of the same upstream,
alternating per call. The upstream is the test double ``forgetting_testkit/fakes/openai_upstream.py``
in its own process (it answers at once, so every millisecond measured is HTTP, JSON and
the proxy's own work). Prints the median latency of both paths over the calls whose
history holds ≥ 90k tokens, the added latency and the ratio, for a few configurations;
then the proxy's own work per call in-process, stage by stage (no HTTP: steadier where the
latencies move by milliseconds from run to run); then the engine alone, memoized (the proxy's
:class:`Reducer`) vs the pure function.
Target (issue 3): added latency ≤ 5 ms per call at 100k tokens.

    python benchmarks/proxy.py [--calls 200] [--tokens 100000] [--repeats 1] [--served MODEL_DIR | --served-bpe]

``--served MODEL_DIR``: the proxy counts prompts with that model's own tokenizer and chat
template (``model.tokenizer: served``; ``--chat-template FILE`` replaces the directory's), as
in front of a real vLLM; ``--served-bpe``: the same with a byte-level BPE trained here (no
model hub) and the shipped ChatML-with-tools template (as ``served_count.py``); without
either, Qwen's approximation (the scripted model's own).
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "testkit" / "src")]

from forgetting.deletion import Reducer, reduce_history  # noqa: E402
from forgetting.deletion.settings import DeletionSettings  # noqa: E402
from forgetting.grid import Deletion, paper_configuration  # noqa: E402
from forgetting.prompt import chat_format  # noqa: E402
from forgetting.prompt.messages import segment  # noqa: E402
from forgetting.prompt.served_format import Counting, load  # noqa: E402
from forgetting.records.calllog import CallLogWriter  # noqa: E402
from forgetting.run.proxy import ProxySettings, start_proxy  # noqa: E402
from forgetting.run.proxy.openai_api import dumps, parse_request  # noqa: E402
from forgetting_testkit import fakes  # noqa: E402
from forgetting_testkit.bpe_model import code_bpe_dir  # noqa: E402
from forgetting_testkit.histories import realistic  # noqa: E402

#: the schema's deletion settings
DELETION = DeletionSettings.from_section({})
CONFIGS = ["baseline", "delayed-turn-tool_output-50", "delayed-token-both-50", "immediate-turn-both-100"]


def history_for(tokens: int, calls: int) -> list[dict]:
    """A history of ``calls`` turns whose prompt is about ``tokens`` tokens."""
    lines = 10
    while True:
        msgs = realistic("tool_calls", calls, seed=1, output_lines=lines)
        n = len(chat_format.prompt_token_ids(msgs))
        if n >= tokens:
            return msgs
        lines = int(lines * tokens / n) + 1


def prefixes(msgs: list[dict]) -> list[list[dict]]:
    turns = segment(msgs).turns
    return [msgs[: t.assistant] for t in turns[1:]] + [msgs]


def post(conn: http.client.HTTPConnection, path: str, body: bytes) -> float:
    t = time.perf_counter()
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    resp.read()
    elapsed = time.perf_counter() - t
    assert resp.status == 200, resp.status
    return elapsed


def host_port(url: str) -> tuple[str, int]:
    host, port = url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
    return host, int(port)


def measure(
    upstream_url: str, name: str, histories: list[list[dict]], sizes: list[int], big: int, repeats: int,
    counting: Counting | None = None,
) -> None:
    deletion = paper_configuration(name)
    with tempfile.TemporaryDirectory() as logs:
        # the histories are mini's (tool calls): its replies' text holds no action (actions=None)
        handle = start_proxy(upstream_url, deletion, 7, logs, f"bench/{name}/t/1", actions=None,
                             settings=ProxySettings.from_parts(), counting=counting)
        direct = http.client.HTTPConnection(*host_port(upstream_url))
        proxied = http.client.HTTPConnection(*host_port(handle.url))
        d_times, p_times = [], []
        for h, size in zip(histories, sizes, strict=True):
            body = json.dumps(
                {"model": "qwen3-coder", "messages": h, "temperature": 0, "max_tokens": 4096}
            ).encode()
            # alternating the paths; --repeats > 1 resends each large call (steadier on a busy machine)
            for _ in range(repeats if size >= big else 1):
                d = post(direct, "/v1/chat/completions", body)
                p = post(proxied, "/v1/chat/completions", body)
                if size >= big:
                    d_times.append(d)
                    p_times.append(p)
        direct.close()
        proxied.close()
        handle.stop()
    md, mp = statistics.median(d_times) * 1e3, statistics.median(p_times) * 1e3
    added = statistics.median(p - d for p, d in zip(p_times, d_times, strict=True)) * 1e3
    print(
        f"{name:<30} calls {len(d_times):>3}  direct {md:7.2f} ms  via proxy {mp:7.2f} ms  "
        f"added {added:6.2f} ms  ratio {mp / md:5.2f}x  {'OK' if added <= 5 else 'ABOVE TARGET'}"
    )


def own_work(name: str, histories: list[list[dict]], sizes: list[int], big: int, counting: Counting | None) -> None:
    """The proxy's own work per call, in this process and without HTTP (steadier than the added
    latency on a busy machine): parsing and checking the request, the deletion, the prompt's
    records for the call log (its token counts) and the call's log line; best of 3 runs' medians."""
    stages = ("parse", "deletion", "prompt count", "log", "total")
    best = dict.fromkeys(stages, float("inf"))
    bodies = [json.dumps({"model": "qwen3-coder", "messages": h, "temperature": 0}).encode() for h in histories]
    for _ in range(3):
        times: dict[str, list[float]] = {k: [] for k in stages}
        reducer = Reducer(paper_configuration(name), 7, actions=None, settings=DELETION)
        with tempfile.TemporaryDirectory() as logs:
            log = CallLogWriter(Path(logs) / "calls.jsonl", {"bench": name},
                                served=counting.served if counting else None)
            known = None
            for body, size in zip(bodies, sizes, strict=True):
                t0 = time.perf_counter()
                req = parse_request(body, known)
                known = req["messages"]
                t1 = time.perf_counter()
                reduction = reducer.reduce(req["messages"])
                if reduction.changed:
                    dumps({**req, "messages": reduction.messages})
                t2 = time.perf_counter()
                prompt = log.prepare(reduction.messages, None)
                t3 = time.perf_counter()
                log.append_call(prompt=prompt, params={}, deleted=reduction.deleted,
                                response={"role": "assistant", "content": "ok"},
                                usage={"prompt_tokens": size, "completion_tokens": 1},
                                t_request=0.0, t_response=0.0)
                t4 = time.perf_counter()
                if size >= big:
                    for k, a, b in zip(stages, (t0, t1, t2, t3, t0), (t1, t2, t3, t4, t4), strict=True):
                        times[k].append(b - a)
        for k in stages:
            best[k] = min(best[k], statistics.median(times[k]))
    print(f"own work, {name:<28} " + "  ".join(f"{k} {best[k] * 1e3:5.2f}" for k in stages) + " ms")


def time_reducer(deletion: Deletion, histories: list[list[dict]], sizes: list[int], big: int) -> tuple[
    float, float, Reducer
]:
    """Median ms per call over the calls with ≥ ``big`` prompt tokens: one memoized Reducer
    through the run (as the proxy keeps it) and the pure function recomputed per call."""
    reducer = Reducer(deletion, 7, actions=None, settings=DELETION)  # tool-call histories (mini)
    memo, pure = [], []
    for h, size in zip(histories, sizes, strict=True):
        t = time.perf_counter()
        reducer.reduce(h)
        if size >= big:
            memo.append(time.perf_counter() - t)
            t = time.perf_counter()
            reduce_history(h, deletion, 7, actions=None)
            pure.append(time.perf_counter() - t)
    return statistics.median(memo) * 1e3, statistics.median(pure) * 1e3, reducer


def engine_only(histories: list[list[dict]], sizes: list[int], big: int) -> None:
    """The engine per call: one memoized Reducer through the run vs the pure function per call."""
    for name in ("delayed-turn-tool_output-50", "delayed-token-both-50"):
        m, p, _ = time_reducer(paper_configuration(name), histories, sizes, big)
        print(
            f"engine alone, {name:<28} memoized (the proxy's) {m:6.2f} ms/call, "
            f"pure function {p:7.2f} ms/call, ratio {p / m:4.0f}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="model calls (turns) of the growing history")
    parser.add_argument("--tokens", type=int, default=100_000, help="prompt tokens at the last call")
    parser.add_argument("--served", help="count prompts with this model directory's tokenizer and template")
    parser.add_argument("--chat-template", help="with --served: this template instead of the directory's")
    parser.add_argument("--served-bpe", action="store_true",
                        help="count prompts with a BPE trained here and the shipped ChatML-with-tools template")
    parser.add_argument(
        "--repeats", type=int, default=1, help="times each call of >= 90%% of the tokens is sent"
    )
    args = parser.parse_args()
    msgs = history_for(args.tokens, args.calls)
    histories = prefixes(msgs)
    sizes = [len(chat_format.prompt_token_ids(h)) for h in histories]
    big = int(0.9 * args.tokens)
    if args.served_bpe:
        args.served = str(code_bpe_dir(Path(tempfile.mkdtemp(prefix="proxy-bench-bpe-"))))
        args.chat_template = str(ROOT / "resources" / "chat_templates" / "chatml-tools.jinja")
    counting = Counting("served", load(args.served, args.chat_template)) if args.served else None
    print(f"prompts counted with {'the served model ' + args.served if args.served else 'Qwen (approximation)'}")
    print(
        f"history: {len(histories)} calls, prompt {sizes[0]:,} → {sizes[-1]:,} tokens "
        f"({len(json.dumps(msgs)) / 1e6:.2f} MB of JSON at the last call); "
        f"medians over calls ≥ {big:,} tokens"
    )
    fake = subprocess.Popen(
        [sys.executable, str(fakes.OPENAI_UPSTREAM)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = fake.stdout.readline().strip()
        for name in CONFIGS:
            measure(url, name, histories, sizes, big, args.repeats, counting)
    finally:
        fake.terminate()
        fake.wait()
    for name in CONFIGS:
        own_work(name, histories, sizes, big, counting)
    engine_only(histories, sizes, big)


if __name__ == "__main__":
    main()
