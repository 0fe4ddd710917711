"""``forgetting collect CONFIG``: every batch's analysis tables into the study's datasets.

Names every planned run without readable output, one line per run, on stderr and in
``results/…/logs/collect.log``; ``statistics.missing_runs`` decides whether that fails
(the default) or keeps them as ``missing`` rows. Runs whose evaluation errored (``timeout``,
``error``) are collected with their ``eval_status`` and named the same way;
``evaluation.on_error`` decides what the statistics make of them.
"""

from __future__ import annotations

import argparse
from typing import Any

from forgetting.commands.common import add_command
from forgetting.commands.study_args import add_study_arguments, study_from_args
from forgetting.foundation.layout import Layout


def add_parser(sub: Any) -> None:
    p = add_command(sub, "collect", help="collect batch analysis tables into the study's Parquet datasets", doc=__doc__)
    add_study_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from forgetting.foundation.inputs import check_output_dir
    from forgetting.report.collect import collect

    study = study_from_args(args)
    check_output_dir(Layout(study.results_dir).datasets, "study.results_dir")
    log = Layout(study.results_dir).results / "logs" / "collect.log"
    report = collect(study, log=log, echo=True)
    where = Layout(study.results_dir).datasets
    missing = f"; {len(report.missing)} marked missing" if report.missing else ""
    errored = f"; {len(report.eval_errors)} evaluation errors (evaluation.on_error)" if report.eval_errors else ""
    print(f"{report.collected} of {report.planned} planned runs collected into {where}{missing}{errored}")
    return 0
