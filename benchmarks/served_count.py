"""Counting a growing trajectory's prompt with the served model's own tokenizer and template
(forgetting.prompt.served_format), windowed against the naive way.

Each model call resends the whole history; the naive count renders the whole prompt through
the chat template at every call (quadratic over a run; its blocks' token ids are memoized in
both ways, so the ratio is the template's share alone). The windowed count renders only the first
message, the previous request's last one and the new ones, and reuses the previous call's
blocks; every call's token ids are checked equal to the whole render's here.

    PYTHONPATH=src:testkit/src python benchmarks/served_count.py [--turns 200] [--output-chars 1500]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from forgetting.prompt.served_format import ServedFormat, load
from forgetting_testkit.bpe_model import code_bpe_dir

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "resources" / "chat_templates" / "chatml-tools.jinja"
TOOLS = [{"type": "function", "function": {"name": "bash", "description": "run a command",
                                           "parameters": {"type": "object",
                                                          "properties": {"command": {"type": "string"}}}}}]


def trajectory(turns: int, output_chars: int) -> list[dict]:
    body = "".join(f"def f_{i}(x):\n    return compute(x, {i})\n" for i in range(output_chars // 40 + 1))[:output_chars]
    out: list[dict] = [{"role": "system", "content": "You solve software tasks."},
                       {"role": "user", "content": "Fix the failing test."}]
    for k in range(turns):
        call = {"name": "bash", "arguments": json.dumps({"command": f"cat src/mod_{k}.py"})}
        out.append({"role": "assistant", "content": f"Step {k}.",
                    "tool_calls": [{"id": f"c{k}", "type": "function", "function": call}]})
        out.append({"role": "tool", "tool_call_id": f"c{k}", "content": body})
    return out


def run(fmt: ServedFormat, calls: list[list[dict]]) -> tuple[float, list[int]]:
    started, counts = time.perf_counter(), []
    for messages in calls:
        counts.append(len(fmt.prompt_token_ids(messages, TOOLS)))
    return time.perf_counter() - started, counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--output-chars", type=int, default=1500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        files = load(str(code_bpe_dir(Path(tmp))), str(TEMPLATE)).files
        full = trajectory(args.turns, args.output_chars)
        calls = [full[:k] for k in range(3, len(full) + 1, 2)]  # one model call per turn
        windowed = ServedFormat(files)
        naive = ServedFormat(files)
        naive.incremental = False  # the whole prompt rendered and tokenized at every call
        assert windowed.incremental, "the shipped template failed the window probe"
        t_win, c_win = run(windowed, calls)
        t_naive, c_naive = run(naive, calls)
        if c_win != c_naive:
            raise SystemExit("error: the windowed count differs from the whole render's")
        ids_equal = all(windowed.prompt_token_ids(m, TOOLS) == naive.prompt_token_ids(m, TOOLS) for m in calls[-3:])
    n = len(calls)
    print(f"trajectory: {args.turns} turns, {len(full)} messages, last prompt {c_win[-1]:,} tokens; {n} calls")
    print(f"naive (whole render every call): {t_naive:8.3f} s  {1000 * t_naive / n:7.2f} ms/call")
    print(f"windowed (served_format)       : {t_win:8.3f} s  {1000 * t_win / n:7.2f} ms/call")
    print(f"ratio naive/windowed: {t_naive / t_win:.1f}x; counts equal on all {n} calls; "
          f"token ids equal on the last 3: {ids_equal}")


if __name__ == "__main__":
    main()
