"""``forgetting cost``: flat and caching-aware cost of a run's model calls (SPEC §5).

PATH is a run directory (its ``calls.jsonl``, else its trajectory), a call log, or a
mini-swe-agent trajectory (``*.traj.json``, 1.x or 2.x). Prints one row per call and a
summary line per run and pricing profile; ``--out`` writes the rows (primary profile:
the first ``--pricing``) as Parquet or CSV instead of printing them. A call log whose last
line is torn (a killed proxy) is an error; ``--allow-torn`` prices the calls before it and
says how many were read. Where the server reported usage, the summary also gives the
prompt check (calls whose rebuilt prompt differs from the server's ``prompt_tokens`` by more
than ``--prompt-tolerance``) and the cost priced from the server's own cached tokens.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from forgetting.commands import arg_types
from forgetting.commands.common import add_allow_torn, add_command, torn_refusal, torn_warning
from forgetting.foundation.atomic import atomic_path
from forgetting.foundation.errors import UserError

_ROW_COLUMNS = (
    ("call", "call"),
    ("n_messages", "msgs"),
    ("prompt_tokens", "prompt"),
    ("cached_tokens", "cached"),
    ("new_tokens", "new"),
    ("rebilled_tokens", "rebilled"),
    ("output_tokens", "output"),
    ("deleted_parts", "del_parts"),
    ("deleted_tokens", "del_tokens"),
    ("reported_cached_tokens", "reported"),
    ("reported_prompt_tokens", "srv_prompt"),
    ("cost_flat", "cost_flat"),
    ("cost_cache", "cost_cache"),
    ("cost_reported", "cost_reported"),
)


def add_parser(sub: Any) -> None:
    p = add_command(sub, "cost", help="flat and caching-aware cost of a run's model calls", doc=__doc__)
    p.add_argument("paths", nargs="+", metavar="PATH", help="run directory, calls.jsonl or *.traj.json")
    p.add_argument(
        "--pricing",
        action="append",
        metavar="NAME",
        help="pricing profile (resources/pricing/NAME.yaml, or a .yaml path); repeat for more; "
        "the first is primary (default: paper)",
    )
    p.add_argument(
        "--pricing-dir", metavar="DIR", help="where the price sheets live (default: resources/pricing)"
    )
    p.add_argument("--out", metavar="FILE", help="write the per-call rows to FILE.parquet or FILE.csv")
    p.add_argument("--run-id", help="run id for the rows (default: the call log's, or the file name)")
    p.add_argument(
        "--prompt-tolerance",
        type=arg_types.number(0, 1),
        metavar="SHARE",
        help="the prompt check: a call whose rebuilt prompt differs from the server's prompt_tokens by more "
        "than this share of them is a mismatch (default: pricing.prompt_tolerance's, 0.01)",
    )
    add_allow_torn(p, "price")
    p.set_defaults(func=run)


def _pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.1f} %" if whole else "n/a"


def summary_line(result: Any, row: dict[str, Any], currency: str) -> str:
    """The one-line summary of a run under one profile."""
    n = row["prompt_tokens"]
    total = row["cost_cache"]
    flat = row["cost_flat"]
    shares = [
        f"cached input {_pct(row['cost_cached'], total)}",
        f"new input {_pct(row['cost_new'], total)}",
        f"re-billed input {_pct(row['cost_rebilled'], total)}",
        f"output {_pct(row['cost_output'], total)}",
    ]
    if row["cost_cache_write"]:
        shares.append(f"cache-write premium {_pct(row['cost_cache_write'], total)}")
    saving = f" ({(total - flat) / flat:+.1%} vs flat)" if flat else ""
    line = (
        f"{result.run_id} [{row['profile']}]: {row['calls']} calls; prompt {n:,} tokens = "
        f"cached {row['cached_tokens']:,} ({_pct(row['cached_tokens'], n)}) + new {row['new_tokens']:,} "
        f"({_pct(row['new_tokens'], n)}) + re-billed {row['rebilled_tokens']:,} "
        f"({_pct(row['rebilled_tokens'], n)}); "
        f"output {row['output_tokens']:,}; deleted {result.summary['deleted_tokens']:,}; "
        f"cost flat {flat:.6f} {currency}, caching-aware {total:.6f} {currency}{saving}; "
        f"shares of cost: {', '.join(shares)}"
    )
    if row["reported_cached_tokens"] is not None:
        ratio = f"{row['cache_agreement']:.3f}" if row["cache_agreement"] is not None else "n/a"
        line += (
            f"; server-reported cached {row['reported_cached_tokens']:,} vs reconstructed "
            f"{row['reconstructed_cached_tokens']:,} over {row['reported_calls']} calls (ratio {ratio}); "
            f"priced from the server's counts {row['cost_reported']:.6f} {currency} vs reconstructed "
            f"{row['cost_cache_on_reported']:.6f} {currency} on those calls"
        )
    profile = next((p for p in result.profiles if p.name == row["profile"]), None)
    if profile is not None and profile.increment_from_server:
        line += (f"; cache blocks of {profile.increment} tokens "
                 + ("(read from the server)" if result.kv_block_size is not None
                    else "(the profile's fallback: the call log records no block size from the server)"))
    line += ("; prompts counted with the served model's tokenizer" if result.prompt_count == "served"
             else "; prompts counted with Qwen's BPE and Qwen3-Coder's format (an approximation)")
    if result.output_estimated:
        line += (f"; output tokens of {result.output_estimated} of {row['calls']} calls counted with Qwen's BPE "
                 "(the server reported none: an approximation)")
    checked = result.summary["prompt_checked_calls"]
    if checked:
        line += (
            f"; prompt check: {result.summary['prompt_mismatch_calls']} of {checked} calls differ from the "
            f"server's prompt_tokens by more than {result.prompt_tolerance * 100:.10g} %"
        )
    return line


def _print_rows(table: Any) -> None:
    rows = table.to_pylist()
    cells = [[h for _, h in _ROW_COLUMNS]]
    for r in rows:
        out = []
        for key, _ in _ROW_COLUMNS:
            v = r[key]
            out.append("-" if v is None else f"{v:.6f}" if isinstance(v, float) else str(v))
        cells.append(out)
    widths = [max(len(c[i]) for c in cells) for i in range(len(_ROW_COLUMNS))]
    for c in cells:
        print("  ".join(x.rjust(w) for x, w in zip(c, widths, strict=True)))


def _write(table: Any, out: Path) -> None:
    from forgetting.records import schemas

    suffix = out.suffix.lower()
    if suffix == ".parquet":
        schemas.write_dataset(table, out, schemas.CALLS_SCHEMA)
    elif suffix == ".csv":
        import pyarrow.csv as pacsv

        with atomic_path(out) as tmp:
            pacsv.write_csv(table, str(tmp))
    else:
        raise UserError(f"--out {out}: unknown format {suffix or '(none)'}; use .parquet or .csv")


def run(args: argparse.Namespace) -> int:
    import pyarrow as pa

    from forgetting.cost import cost_run, load_profiles
    from forgetting.foundation.inputs import check_output_file
    from forgetting.records.calllog import TornCallLog

    out = Path(args.out) if args.out else None
    if out is not None and out.suffix.lower() not in (".parquet", ".csv"):
        raise UserError(f"--out {out}: unknown format {out.suffix or '(none)'}; use .parquet or .csv")
    if out is not None:
        check_output_file(out, "--out")
    if args.run_id and len(args.paths) > 1:
        raise UserError("--run-id names one run; give one PATH with it")
    if args.prompt_tolerance is not None and not args.prompt_tolerance >= 0:
        raise UserError(f"--prompt-tolerance {args.prompt_tolerance}: must be a share ≥ 0 (0.01 = 1 %)")
    profiles = load_profiles(args.pricing_dir, args.pricing or ["paper"])
    try:
        results = [
            cost_run(
                path,
                profiles,
                run_id=args.run_id,
                allow_torn=args.allow_torn,
                prompt_tolerance=args.prompt_tolerance,
            )
            for path in args.paths
        ]
    except TornCallLog as exc:
        raise torn_refusal(exc, "price") from None
    for result in results:
        if result.torn_line is not None:
            print(torn_warning(result.source, result.torn_line, len(result.calls), "priced"), file=sys.stderr)
    if out is None:
        for result in results:
            _print_rows(result.calls)
    for result in results:
        for profile in profiles:
            print(summary_line(result, result.profile_row(profile.name), profile.currency))
    if out is not None:
        _write(pa.concat_tables([r.calls for r in results]), out)
        print(f"{sum(r.calls.num_rows for r in results)} call rows -> {out}")
    return 0
