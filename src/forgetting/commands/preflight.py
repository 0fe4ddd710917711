"""``forgetting preflight CONFIG [OVERLAY ...] [--partition gpu|cpu] [--serve] [--first-step] [--smoke]
[--gold]``: is this site ready for the study? One line per check, ``OK`` or ``FAIL`` with what to
do; exit status 1 on any FAIL.

    forgetting preflight config/config.yaml --partition gpu --serve   # on a GPU node (srun …)
    forgetting preflight config/config.yaml --partition cpu           # on a CPU node
    forgetting preflight config/demo.yaml --first-step                # each agent's first step, here
    forgetting preflight config/demo.yaml --smoke                     # the demo, here
    forgetting preflight config/config.yaml --partition cpu --gold    # images of another architecture

Without ``--partition``: the checks of every partition the study uses (``model.backend: vllm``
→ gpu, ``evaluation.backend: apptainer`` → cpu), as on a node that runs both. ``--serve`` starts
the model server and asks ``/v1/models`` and ``/tokenize``; ``--first-step`` runs each agent on
the study's first task for ONE model call through the batch code itself (the served model started
as a batch job starts it, the agent launched with a run's own command line: the same ``apptainer
exec``, binds, writable layer and environment; into ``<results>/preflight/first-step/``, nothing
evaluated) and passes when the call was answered, the agent executed its action and stopped at
the cap — a failure names the agent, the stage and the log to read; ``--smoke`` takes one
baseline task per agent through run, evaluation and analysis (into ``<results>/preflight/smoke/``);
``--gold`` evaluates every task's gold patch (it must resolve) and the unfixed repository (it must
not) with the study's evaluation backend and images. The workflow's ``preflight`` target runs the
node checks as one small job per partition, and the first step in the job of the partition where
the agents run beside the model server when ``cluster.preflight_first_step`` is true
(docs/cluster.md, *First launch*).
"""

from __future__ import annotations

import argparse
from typing import Any

from forgetting.commands.study_args import add_study_arguments, study_from_args


def add_parser(sub: Any) -> None:
    p = sub.add_parser("preflight", help="check that this site is ready for the study", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_study_arguments(p)
    p.add_argument("--partition", choices=("gpu", "cpu"), help="the checks of that partition's jobs only")
    p.add_argument("--serve", action="store_true", help="also start the model server and ask /v1/models, /tokenize")
    p.add_argument("--first-step", action="store_true",
                   help="also run each agent for one model call against the served model, as a batch job runs it")
    p.add_argument("--smoke", action="store_true", help="also run one baseline task per agent end to end")
    p.add_argument("--gold", action="store_true",
                   help="also check every task's gold patch resolves and its unfixed repository does not")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from forgetting.cluster.preflight import node_checks, partitions_of

    study = study_from_args(args)
    partitions = [args.partition] if args.partition else partitions_of(study)
    checks = node_checks(study, partitions)
    if not partitions:
        print("no cluster partition: model.backend and evaluation.backend run where this command runs")
    for check in checks:
        print(check.line(), flush=True)
    if args.serve:
        from forgetting.cluster.preflight.serve import serve_checks

        for check in serve_checks(study):
            checks.append(check)
            print(check.line(), flush=True)
    if args.first_step:
        from forgetting.cluster.preflight.first_step import first_step_checks

        for check in first_step_checks(study):
            checks.append(check)
            print(check.line(), flush=True)
    if args.smoke:
        from forgetting.cluster.preflight.smoke import smoke_checks

        for check in smoke_checks(study):
            checks.append(check)
            print(check.line(), flush=True)
    if args.gold:
        from forgetting.cluster.preflight.gold import gold_checks

        for check in gold_checks(study):
            checks.append(check)
            print(check.line(), flush=True)
    failed = [c for c in checks if not c.ok]
    if failed:
        print(f"{len(failed)} of {len(checks)} checks failed: {', '.join(c.name for c in failed)}")
        return 1
    print(f"all {len(checks)} checks passed" if checks else "nothing to check")
    return 0
