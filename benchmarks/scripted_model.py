"""Per-call latency of the scripted model, in process and over HTTP.

Replays the requests of recorded runs of the fixture task (tests/data/scripted_tasks) —
a baseline run and a long run under immediate deletion of every tool output (a stubborn
agent re-reading until it loops) — against a fresh model, and prints per-call latency
(median, 95th percentile, max) with the prompt size. Then compares the prefix-cache
emulation (hash-chained 16-token blocks) with the naive way (longest common prefix against
every earlier prompt) on the long run's prompts.

    python benchmarks/scripted_model.py
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "testkit" / "src"))

from forgetting.demo.scripted import ScriptedModelServer, ScriptedSettings  # noqa: E402
from forgetting.demo.scripted.prefix_cache import PrefixCache  # noqa: E402
from forgetting.prompt import chat_format  # noqa: E402
from forgetting_testkit import scripted as S  # noqa: E402


def quantiles(xs: list[float]) -> str:
    xs = sorted(xs)
    p95 = xs[min(len(xs) - 1, int(0.95 * len(xs)))]
    med = statistics.median(xs)
    return f"median {med * 1e3:6.1f} ms  p95 {p95 * 1e3:6.1f} ms  max {xs[-1] * 1e3:6.1f} ms"


def record(delete, settings: ScriptedSettings, style: str) -> S.Run:
    with tempfile.TemporaryDirectory() as tmp:
        repo = S.checkout(Path(tmp) / "repo")
        return S.drive(S.model(settings), repo, style=style, delete=delete, seed_header="bench", max_calls=60)


def replay_in_process(run: S.Run, style: str) -> list[float]:
    model = S.model()
    tools = [S.BASH_TOOL] if style == "tool_calls" else None
    out = []
    for sent in run.sent:
        t0 = time.perf_counter()
        model.complete({"messages": sent, **({"tools": tools} if tools else {})}, "bench")
        out.append(time.perf_counter() - t0)
    return out


def replay_http(run: S.Run, style: str) -> list[float]:
    tools = [S.BASH_TOOL] if style == "tool_calls" else None
    out = []
    with ScriptedModelServer(S.TASKS, settings=S.CALM) as server:
        for sent in run.sent:
            body = json.dumps({"messages": sent, **({"tools": tools} if tools else {})}).encode()
            req = urllib.request.Request(
                server.url + "/chat/completions",
                data=body,
                headers={"Content-Type": "application/json", "X-Forgetting-Seed": "bench"},
            )
            t0 = time.perf_counter()
            with urllib.request.urlopen(req) as resp:
                resp.read()
            out.append(time.perf_counter() - t0)
    return out


def naive_cached(prompts: list[list[int]]) -> list[int]:
    seen: list[list[int]] = []
    out = []
    for p in prompts:
        best = 0
        for q in seen:
            n = 0
            for a, b in zip(p, q, strict=False):
                if a != b:
                    break
                n += 1
            best = max(best, n)
        out.append(16 * (min(best, len(p) - 1) // 16))
        seen.append(p)
    return out


def main() -> None:
    chat_format.prompt_token_ids([{"role": "user", "content": "warm up"}])
    cases = {
        "baseline (tool calls)": (None, S.CALM, "tool_calls"),
        "baseline (text)": (None, S.CALM, "text"),
        "immediate-turn-tool_output-100, stubborn (tool calls)": (
            S.delete_tool_output(0),
            ScriptedSettings.from_mapping({"stubborn_rate": 1.0, "stubborn_read_attempts": 60}),
            "tool_calls",
        ),
    }
    long_run = None
    for name, (delete, settings, style) in cases.items():
        run = record(delete, settings, style)
        sizes = [r["usage"]["prompt_tokens"] for r in run.responses]
        print(f"{name}: {len(run.sent)} calls, prompts {min(sizes)}–{max(sizes)} tokens")
        print(f"  in process  {quantiles(replay_in_process(run, style))}")
        print(f"  over HTTP   {quantiles(replay_http(run, style))}")
        long_run = run
    assert long_run is not None
    prompts = [chat_format.prompt_token_ids(s, [S.BASH_TOOL]) for s in long_run.sent]
    t0 = time.perf_counter()
    cache = PrefixCache()
    chained = [cache.lookup_and_store(p) for p in prompts]
    t_chain = time.perf_counter() - t0
    t0 = time.perf_counter()
    naive = naive_cached(prompts)
    t_naive = time.perf_counter() - t0
    assert chained == naive, "block-chain emulation disagrees with the naive longest common prefix"
    print(
        f"prefix cache over {len(prompts)} prompts ({sum(map(len, prompts))} tokens): block chain "
        f"{t_chain * 1e3:.1f} ms, naive LCP against every earlier prompt {t_naive * 1e3:.1f} ms "
        f"(ratio {t_naive / t_chain:.1f}x); identical cached counts"
    )


if __name__ == "__main__":
    main()
