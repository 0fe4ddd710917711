"""``forgetting plan CONFIG [OVERLAY ...] [--out runs.parquet]``: the study's run table and its summary."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("plan", help="expand a study config into its run table", description=__doc__)
    p.add_argument("config", nargs="+",
                   help="study config (e.g. config/config.yaml), then optional overlays (config/policies.yaml)")
    p.add_argument("--out", help="write the run table as Parquet to this path")
    p.add_argument("--batches", action="store_true", help="list the batch keys (forgetting run-batch --batch KEY)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a top-level key, as snakemake --config does (repeatable)")
    p.set_defaults(func=run)


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs, values parsed as YAML (so lists and numbers work)."""
    import yaml

    from forgetting.errors import ConfigError

    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE")
        out[key] = yaml.safe_load(value)
    return out


def run(args: argparse.Namespace) -> int:
    from forgetting.config import load_study
    from forgetting.plan import plan_batches, summarize, write_run_table

    study = load_study(args.config, parse_overrides(args.set))
    print(summarize(study).line())
    if args.out:
        write_run_table(study, args.out)
    if args.batches:
        for b in plan_batches(study):
            print(f"{b.key}\t{len(b.runs)} runs")
    return 0
