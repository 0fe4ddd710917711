"""``forgetting evaluate``: evaluate one run directory, a patch file on an instance, or
every run whose evaluation errored.

    forgetting evaluate results/runs/mini/baseline/django__django-11099/1 --config config/config.yaml
    forgetting evaluate --patch fix.diff --instance demo__textkit-3 --config config/demo.yaml
    forgetting evaluate --errored --config config/demo.yaml

Writes ``eval.json`` (and the ``eval/`` directory with the test log) into the run directory,
or for a patch file into ``--out`` (default: the patch file's directory), and prints the status.
A patch's evaluation never replaces what it did not write: when ``--out`` already holds an
``eval.json`` or ``eval/``, it stops before any work (remove them, or give another ``--out``).
``--errored`` evaluates again each run of the study whose ``eval.json`` is an evaluation error
(``timeout`` or ``error``) or is there but unreadable (torn), leaves every other run as it is
and rewrites the evaluation manifest of each batch it touched, so the next workflow run
analyses those batches again.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from forgetting.commands import arg_types
from forgetting.commands.common import add_command
from forgetting.commands.study_args import noted, parse_overrides
from forgetting.foundation.errors import UserError
from forgetting.foundation.layout import EVAL_DIR, EVAL_JSON, PATCH, RUN_JSON


def add_parser(sub: Any) -> None:
    p = add_command(sub, "evaluate", help="evaluate a run's patch (SWE-bench grading)", doc=__doc__)
    p.add_argument(
        "run_dir", nargs="?", help="a run directory (results/runs/AGENT/CONFIGURATION/TASK/REPEAT)"
    )
    p.add_argument(
        "--config",
        action="append",
        metavar="CONFIG",
        help="study config (default: config/config.yaml); repeat it for overlays (config/policies.yaml)",
    )
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a top-level key, as snakemake --config does (repeatable)")
    p.add_argument(
        "--errored",
        action="store_true",
        help="evaluate again every run whose evaluation errored (timeout or error) or whose eval.json is "
        "unreadable, nothing else",
    )
    p.add_argument("--patch", help="evaluate this patch file instead of a run directory")
    p.add_argument("--instance", help="the instance id the patch is for (with --patch)")
    p.add_argument("--out", help="with --patch: where eval.json goes (default: the patch file's directory)")
    p.add_argument("--backend", choices=("docker", "apptainer", "local"), help="override evaluation.backend")
    p.add_argument("--timeout", type=arg_types.integer(1), help="override evaluation.timeout_s (seconds, ≥ 1)")
    p.set_defaults(func=run)


def _target(args: argparse.Namespace) -> tuple[str, str, Path, Path]:
    """(label, instance id, patch file, output directory) of the evaluation asked for."""
    from forgetting.records import is_finished
    from forgetting.study.plan import parse_run_id

    if args.errored:
        raise UserError("evaluate: --errored takes no run directory, --patch or --instance")
    if args.patch or args.instance:
        if args.run_dir:
            raise UserError("evaluate: give a run directory or --patch/--instance, not both")
        if not (args.patch and args.instance):
            raise UserError("evaluate: --patch and --instance go together")
        patch = Path(args.patch)
        if not patch.is_file():
            raise UserError(f"{patch}: patch file not found")
        out = Path(args.out) if args.out else patch.resolve().parent
        if out.exists() and not out.is_dir():
            raise UserError(f"--out {out}: not a directory")
        for existing in (out / EVAL_JSON, out / EVAL_DIR):
            if existing.exists() or existing.is_symlink():
                raise UserError(
                    f"{existing}: already exists; evaluating a patch never replaces files it did not write "
                    "(remove it, or give --out a new directory)"
                )
        return args.instance, args.instance, patch, out
    if not args.run_dir:
        raise UserError("evaluate: give a run directory, or --patch FILE --instance ID")
    run_dir = Path(args.run_dir)
    try:
        run_id = "/".join(run_dir.resolve().parts[-4:])
        _, _, task, _ = parse_run_id(run_id)
    except ValueError:
        raise UserError(
            f"{run_dir}: not a run directory (expected …/runs/AGENT/CONFIGURATION/TASK/REPEAT)"
        ) from None
    if not is_finished(run_dir):
        raise UserError(f"{run_dir}: no {RUN_JSON}; the run has not finished")
    from forgetting.evaluate.batch import check_run_record

    check_run_record(run_dir, run_id)  # a run.json of the wrong shape is not evaluated anyway
    return run_id, task, run_dir / PATCH, run_dir


def with_overrides(study: Any, backend: str | None, timeout_s: int | None) -> Any:
    """``study`` with the command line's ``--backend`` and ``--timeout`` in its evaluation settings
    (checked against the schema like the section's own values)."""
    import dataclasses

    from forgetting.study.evaluation import EvalSettings

    given = {k: v for k, v in {"backend": backend, "timeout_s": timeout_s}.items() if v is not None}
    if not given:
        return study
    evaluation = EvalSettings.from_section({**study.as_config()["evaluation"], **given}, root=study.root,
                                           scratch=study.plan.scratch_dir)
    return dataclasses.replace(study, evaluation=evaluation)


def _redo_errored(study: Any) -> int:
    from forgetting.evaluate.redo import redo_errored

    report = redo_errored(study, say=print)
    if not report.statuses:
        print("no evaluation errored: nothing to redo")
        return 0
    still = report.still_errored
    print(
        f"{len(report.statuses)} evaluation(s) redone in {len(report.batches)} batch(es)"
        + (f"; {len(still)} errored again: {', '.join(still)}" if still else "")
        + "; rerun the workflow to analyse them"
    )
    return 0


def run(args: argparse.Namespace) -> int:
    from forgetting.evaluate.backends import make_backend
    from forgetting.evaluate.evaluate import evaluate_patch, read_patch, read_patch_file
    from forgetting.instances.load import load_instances
    from forgetting.study.config import load_study

    configs = args.config or ["config/config.yaml"]
    if args.errored and not (args.run_dir or args.patch or args.instance):
        study = noted(args, load_study(configs, parse_overrides(args.set)))
        return _redo_errored(with_overrides(study, args.backend, args.timeout))
    label, instance_id, patch_file, out = _target(args)
    study = with_overrides(noted(args, load_study(configs, parse_overrides(args.set))), args.backend, args.timeout)
    settings = study.evaluation
    backend = make_backend(settings, study)
    instance = load_instances(study, [instance_id])[instance_id]
    # a run's patch.diff: never a link followed out of the results tree
    patch = read_patch(out) if args.run_dir else read_patch_file(patch_file) if patch_file.is_file() else ""
    if patch.strip():
        backend.check({instance_id: instance})
    report = evaluate_patch(
        instance,
        patch,
        backend,
        out_dir=out,
        timeout_s=settings.timeout_s,
        run_id=label if args.run_dir else None,
    )
    counts = ", ".join(
        f"{kind} {len(report.tests[kind]['success'])}/"
        f"{len(report.tests[kind]['success']) + len(report.tests[kind]['failure'])}"
        for kind in ("FAIL_TO_PASS", "PASS_TO_PASS")
    )
    print(f"{label}: {report.status} ({counts}) -> {out / EVAL_JSON}")
    for line in (report.error, report.note):
        if line:
            print(f"  {line}")
    return 0
