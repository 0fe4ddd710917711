"""``forgetting plan CONFIG [OVERLAY ...] [--out runs.parquet]``: the study's run table and its summary."""

from __future__ import annotations

import argparse
from typing import Any

from forgetting.commands.study_args import add_study_arguments, study_from_args


def add_parser(sub: Any) -> None:
    p = sub.add_parser("plan", help="expand a study config into its run table", description=__doc__)
    add_study_arguments(p)
    p.add_argument("--out", help="write the run table as Parquet to this path")
    p.add_argument("--batches", action="store_true", help="list the batch keys (forgetting run-batch --batch KEY)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from forgetting.inputs import check_output_file
    from forgetting.plan import plan_batches, summarize, write_run_table

    if args.out:
        check_output_file(args.out, "--out")
    study = study_from_args(args)
    print(summarize(study).line())
    if args.out:
        write_run_table(study, args.out)
    if args.batches:
        for b in plan_batches(study):
            print(f"{b.key}\t{len(b.runs)} runs")
    return 0
