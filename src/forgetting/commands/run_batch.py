"""``forgetting run-batch CONFIG --batch KEY``: every unfinished run of one batch.

    forgetting plan config/demo.yaml --batches              # the batch keys
    forgetting run-batch config/demo.yaml --batch mini/baseline/b000-1a2b3c4d

What the workflow's ``run_batch`` job does: one model server for the batch, the batch's
runs ``execution.concurrency`` at a time, each behind its own deletion proxy; finished runs
are kept (``--force`` redoes them); the manifest goes to ``--manifest`` (default
``results/…/batches/KEY/runs.json``). Exits with status 2 naming the runs that met an
infrastructure failure; running it again redoes only those.
"""

from __future__ import annotations

import argparse
from typing import Any

from forgetting.commands.common import add_command
from forgetting.commands.study_args import add_study_arguments, study_from_args
from forgetting.foundation.errors import UserError
from forgetting.foundation.layout import Layout


def add_parser(sub: Any) -> None:
    p = add_command(sub, "run-batch", help="carry out the unfinished runs of one batch", doc=__doc__)
    add_study_arguments(p, example="config/demo.yaml")
    p.add_argument("--batch", required=True, help="AGENT/CONFIGURATION/BATCH, e.g. mini/baseline/b000-1a2b3c4d")
    p.add_argument("--manifest", help="where the batch manifest goes (default: results/…/batches/KEY/runs.json)")
    p.add_argument("--log", help="append progress lines to this file too")
    p.add_argument("--force", action="store_true", help="redo the batch's finished runs too")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from forgetting.foundation.inputs import check_output_dir, check_output_file
    from forgetting.run import run_batch
    from forgetting.study.plan import plan_batches

    study = study_from_args(args, **({"force_rerun": True} if args.force else {}))
    key = args.batch.strip("/")
    batches = {b.key: b for b in plan_batches(study)}
    if key not in batches:
        known = ", ".join(sorted(batches)[:3])
        configs = " ".join(args.config)
        raise UserError(f"--batch {key!r} is not a batch of {configs} (e.g. {known}; see `forgetting plan --batches`)")
    manifest = args.manifest or Layout(study.results_dir).batch_dir(key) / "runs.json"
    check_output_file(manifest, "--manifest")
    if args.log:
        check_output_file(args.log, "--log", append=True)
    check_output_dir(Layout(study.results_dir).results / "runs", "study.results_dir")
    document = run_batch(study, batches[key], manifest=manifest, log=args.log)
    print(f"{key}: {document['summary']['statuses']} -> {manifest}")
    return 0
