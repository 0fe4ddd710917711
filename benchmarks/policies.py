"""The engine's time per call for the policies beyond the paper, on a history growing to ~100k tokens.

The reuse-aware policy and the cache-aware gate decide by a fold over the run's turns (which
outputs went stale, which rewrites the gate made after each history length). The proxy keeps
one :class:`Reducer` — and so one policy instance — per run, which memoizes the fold and redoes
it only from the first turn that changed; the naive way is the pure function per call
(:func:`reduce_history`: a fresh policy folding the whole history again). Prints, per policy,
the median milliseconds per call over the calls whose history holds ≥ 90 % of the target
tokens, both ways, and the ratio; and the paper's ``delayed-turn-tool_output-100`` for reference.

    python benchmarks/policies.py [--calls 200] [--tokens 100000]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT.parent / "src"), str(ROOT.parent / "testkit" / "src"), str(ROOT)]

from proxy import history_for, prefixes, time_reducer  # noqa: E402  (benchmarks/proxy.py)

from forgetting.deletion.names import parse_configuration_name  # noqa: E402
from forgetting.deletion.policy import PolicyContext  # noqa: E402
from forgetting.prompt import chat_format  # noqa: E402

NAMES = [
    "delayed-turn-tool_output-100",
    "keep8-turn-tool_output-100",
    "batch4-delayed-turn-tool_output-100",
    "gate20-delayed-turn-tool_output-100",
    "reuse8-delayed",
    "mask10",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--tokens", type=int, default=100_000)
    args = ap.parse_args()
    msgs = history_for(args.tokens, args.calls)
    histories = prefixes(msgs)
    sizes = [len(chat_format.prompt_token_ids(h)) for h in histories]
    big = int(0.9 * args.tokens)
    print(f"{len(histories)} calls, last prompt {sizes[-1]} tokens; timing calls with ≥ {big} tokens")
    context = PolicyContext.from_parts({"agent": {"turn_cap": args.calls + 1}})
    for name in NAMES:
        m, p, reducer = time_reducer(parse_configuration_name(name, "bench", context), histories, sizes, big)
        print(
            f"{name:<38} per run (the proxy's) {m:7.2f} ms/call   pure per call {p:8.2f} ms/call   "
            f"ratio {p / m:6.1f}x   rewritten turns {len({x.turn for x in reducer.reduce(msgs).records})}"
        )


if __name__ == "__main__":
    main()
