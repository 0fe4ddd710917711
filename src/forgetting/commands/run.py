"""``forgetting run CONFIG --run-id ID [--force]``: one run, with its own model server.

    forgetting run config/demo.yaml --run-id mini/delayed-turn-tool_output-100/demo__confkit-1/1

Starts the config's model server (the scripted stand-in or vLLM), runs the agent behind the
run's deletion proxy and writes the finished run directory under
``results/…/runs/AGENT/CONFIGURATION/TASK/REPEAT/`` (docs/runs.md). A finished run is kept
unless ``--force``.
"""

from __future__ import annotations

import argparse
from typing import Any

from forgetting.commands.common import add_command
from forgetting.commands.study_args import add_study_arguments, study_from_args
from forgetting.foundation.errors import UserError
from forgetting.foundation.layout import Layout


def add_parser(sub: Any) -> None:
    p = add_command(sub, "run", help="carry out one run (agent + proxy + model server)", doc=__doc__)
    add_study_arguments(p, example="config/demo.yaml")
    p.add_argument("--run-id", required=True, help="AGENT/CONFIGURATION/TASK/REPEAT, a run of the study's plan")
    p.add_argument("--force", action="store_true", help="redo the run even if it has finished")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from forgetting.foundation.inputs import check_output_dir
    from forgetting.run import run_one
    from forgetting.study.plan import parse_run_id, plan_runs

    study = study_from_args(args, **({"force_rerun": True} if args.force else {}))
    try:
        parse_run_id(args.run_id)
    except ValueError as exc:
        raise UserError(f"--run-id: {exc}") from None
    wanted = args.run_id.strip("/")
    match = [r for r in plan_runs(study) if r.run_id == wanted]
    if not match:
        configs = " ".join(args.config)
        raise UserError(f"--run-id {wanted!r} is not a run of {configs} (see `forgetting plan {configs}`)")
    check_output_dir(Layout(study.results_dir).run_dir(wanted), "study.results_dir")
    document = run_one(study, match[0])
    entry = document["runs"][wanted]
    print(f"{wanted}: {entry['status']} ({entry['turns']} turns) -> {Layout(study.results_dir).run_dir(wanted)}")
    return 0
