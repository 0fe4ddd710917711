"""``forgetting report CONFIG``: statistics, tables and figures from the collected datasets.

Reads only ``results/…/datasets/{runs,tool_calls,run_costs}.parquet`` (no run directory, no
agent, model or evaluation), then writes ``stats/``, ``tables/`` and ``figures/``.
A run whose evaluation errored stops the statistics by default (``evaluation.on_error: fail``),
naming the runs and the command that redoes just their evaluation. ``--print TABLE`` prints a
table as Markdown from the statistics already on disk (the demo
ends with ``--print policies_comparison``). The HTML
report of the same files: ``snakemake analysis --allowed-rules stats tables figures analysis
--report results/report.html``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from forgetting.commands.common import add_command
from forgetting.commands.study_args import add_study_arguments, study_from_args
from forgetting.foundation.errors import UserError
from forgetting.foundation.layout import Layout

STEPS = ("stats", "tables", "figures")


def add_parser(sub: Any) -> None:
    p = add_command(sub, "report", help="regenerate statistics, tables and figures from the datasets", doc=__doc__)
    add_study_arguments(p)
    p.add_argument(
        "--only",
        choices=STEPS,
        action="append",
        help="run only this step (repeatable); later steps read the earlier steps' files",
    )
    p.add_argument(
        "--print",
        dest="print_tables",
        action="append",
        default=[],
        metavar="TABLE",
        help="print this table (Markdown) from the statistics on disk, e.g. policies_comparison "
        "(repeatable); with --print, no step runs unless --only names it",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from forgetting.foundation.inputs import check_output_dir
    from forgetting.report.figures import write_figures
    from forgetting.report.stats.run import write_stats
    from forgetting.report.tables import TABLES, render_table, write_tables

    for name in args.print_tables:
        if name not in TABLES:
            raise UserError(f"--print: {name!r} is not a table; choose from: {', '.join(TABLES)}")
    study = study_from_args(args)
    layout = Layout(study.results_dir)
    logs = layout.results / "logs"
    steps = args.only or ([] if args.print_tables else list(STEPS))
    for step in steps:  # before any work: where each step writes
        check_output_dir(getattr(layout, step), "study.results_dir")
    for step in STEPS:
        if step not in steps:
            continue
        started = time.perf_counter()
        if step == "stats":
            paths = list(
                write_stats(study, log=logs / "stats.log", configs=args.config, overrides=args.set).values()
            )
        elif step == "tables":
            paths = write_tables(study, log=logs / "tables.log")
        else:
            paths = write_figures(study, log=logs / "figures.log")
        where = sorted({str(p.parent) for p in paths})
        print(f"{step}: {len(paths)} files in {', '.join(where)} ({time.perf_counter() - started:.1f} s)")
    for name in args.print_tables:
        print(render_table(study, name))
    return 0
