"""``forgetting label PATH [--agent mini|mini-text|trae] [--out FILE.parquet|.csv]``: label every
tool call of a run (read, search, edit, test, submit, other) and detect re-fetches.

PATH is a run directory of ours, a mini-swe-agent ``*.traj.json`` (either format), a Trae
agent trajectory file, or a directory holding any of these (every run directory and
trajectory file below it is labelled). One row per tool call; a summary line per run. A
proxy call log whose last line is torn (a killed proxy) is an error; ``--allow-torn`` takes
the deletions of the calls before it and says how many were read.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from forgetting.commands import arg_types
from forgetting.commands.common import add_allow_torn, torn_refusal, torn_warning
from forgetting.foundation.atomic import atomic_path
from forgetting.foundation.errors import UserError

_SHOWN = (
    "turn",
    "index",
    "tool",
    "label",
    "is_read",
    "n_distinct_lines",
    "is_refetch",
    "overlap",
    "refetch_distance",
    "was_deleted",
    "summary",
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "label", help="label tool calls and detect re-fetches in trajectories", description=__doc__
    )
    p.add_argument("path", help="a run directory, a trajectory file, or a directory of them")
    p.add_argument(
        "--agent",
        choices=["mini", "mini-text", "trae"],
        help="the agent that wrote it (inferred from the run or the file when not given)",
    )
    p.add_argument("--out", help="write the rows to FILE.parquet or FILE.csv")
    p.add_argument(
        "--threshold",
        type=arg_types.number(0, 1, exclusive_minimum=True),
        default=0.8,
        help="share of a read's distinct lines seen before that makes it a re-fetch (default 0.8)",
    )
    p.add_argument(
        "--looping-window",
        type=arg_types.integer(2, 100_000),
        default=10,
        help="consecutive identical tool calls that make a run looping (default 10)",
    )
    p.add_argument(
        "--turn-cap", type=arg_types.integer(1, 100_000),
        help="the run's turn cap (default: from run.json or the trajectory)",
    )
    p.add_argument("--rules", help="a label-rules table to use instead of the packaged one")
    p.add_argument("--call-log", help="a proxy call log (calls.jsonl) for a bare trajectory file")
    add_allow_torn(p, "use")
    p.set_defaults(func=run)


def _write(table: Any, out: Path) -> None:
    from forgetting.records.schemas import TOOL_CALLS_SCHEMA, write_dataset

    if out.suffix == ".parquet":
        write_dataset(table, out, TOOL_CALLS_SCHEMA)
    elif out.suffix == ".csv":
        import pyarrow.csv as pcsv

        with atomic_path(out) as tmp:
            pcsv.write_csv(table, str(tmp))
    else:
        raise UserError(f"--out {out}: expected a .parquet or .csv file name")


def _print_rows(table: Any) -> None:
    rows = table.select(list(_SHOWN)).to_pylist()
    if not rows:
        return
    print("\t".join(_SHOWN))
    for r in rows:
        cells = []
        for k in _SHOWN:
            v = r[k]
            if k == "overlap" and v is not None:
                v = f"{v:.3f}"
            elif k == "summary":
                v = v if len(v) <= 80 else v[:79] + "…"
            cells.append("" if v is None else str(v))
        print("\t".join(cells))


def run(args: argparse.Namespace) -> int:
    import pyarrow as pa

    from forgetting.behaviour import label_run
    from forgetting.foundation.inputs import check_output_file
    from forgetting.records import find_runs
    from forgetting.records.calllog import TornCallLog

    if args.out and Path(args.out).suffix not in (".parquet", ".csv"):
        raise UserError(f"--out {args.out}: expected a .parquet or .csv file name")
    if args.out:
        check_output_file(args.out, "--out")
    root = Path(args.path)
    inputs = find_runs(root)
    if args.call_log and len(inputs) != 1:
        raise UserError("--call-log: give it with a single trajectory file")
    tables = []
    for item in inputs:
        try:
            result = label_run(
                item, agent=args.agent, threshold=args.threshold, looping_window=args.looping_window,
                turn_cap=args.turn_cap, rules=args.rules, call_log=args.call_log, allow_torn=args.allow_torn,
            )
        except TornCallLog as exc:
            raise torn_refusal(exc, "label with the deletions of") from None
        d = result.deletions
        if d is not None and d.torn_line is not None:
            print(torn_warning(d.source, d.torn_line, d.calls, "took the deletions of"), file=sys.stderr)
        table = result.table
        if not result.run_id and len(inputs) > 1:  # tell bare files apart in one table
            name = str(item.path.relative_to(root)) if root.is_dir() else str(item.path)
            table = table.set_column(0, "run_id", pa.array([name] * table.num_rows, pa.string()))
        if not args.out:
            _print_rows(table)
        print(result.line())
        tables.append(table)
    if args.out:
        combined = pa.concat_tables(tables)
        _write(combined, Path(args.out))
        print(f"wrote {combined.num_rows} tool calls of {len(tables)} run(s) to {args.out}")
    return 0
