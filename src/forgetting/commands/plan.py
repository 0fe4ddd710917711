"""``forgetting plan CONFIG [OVERLAY ...] [--out runs.parquet]``: the study's run table and its summary.

Where the study's SWE-bench rows are at hand (``dataset.instances``: a file that exists, or
``hf:NAME``), the task list is checked against them — every task a row, its repository the
id's — and counted per repository.

For a study served by vLLM it also prints the GPU time as a range, typical to worst case, and
each batch job's time limit (docs/cluster.md, *GPU time*: ``forgetting.run.gpu_time``)."""

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
    from forgetting.foundation.inputs import check_output_file
    from forgetting.instances.load import check_task_list
    from forgetting.run.gpu_time import plan_lines
    from forgetting.study.plan import plan_batches, summarize, write_run_table

    if args.out:
        check_output_file(args.out, "--out")
    study = study_from_args(args)
    checked = check_task_list(study)
    print(summarize(study).line())
    for line in checked.lines() if checked is not None else ():
        print(line)
    for line in plan_lines(study, [len(b.runs) for b in plan_batches(study)]):
        print(line)
    if args.out:
        write_run_table(study, args.out)
    if args.batches:
        for b in plan_batches(study):
            print(f"{b.key}\t{len(b.runs)} runs")
    return 0
