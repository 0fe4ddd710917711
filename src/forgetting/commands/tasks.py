"""``forgetting tasks sample``: draw the seeded, repository-stratified task subset."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from forgetting.commands import arg_types
from forgetting.foundation.atomic import write_text
from forgetting.foundation.errors import UserError


def add_parser(sub: Any) -> None:
    p = sub.add_parser("tasks", help="task lists: draw the stratified sample", description=__doc__)
    tsub = p.add_subparsers(dest="tasks_command", required=True, metavar="ACTION")
    s = tsub.add_parser("sample", help="draw N ids stratified by repository")
    s.add_argument("--from", dest="source", default="resources/tasks/swe-bench-verified-all.txt",
                   help="file with the pool of instance ids")
    s.add_argument("-n", type=arg_types.integer(1), default=100, help="sample size (default 100)")
    s.add_argument("--seed", type=arg_types.seed, default=20250101, help="sampling seed")
    s.add_argument("--out", help="write the ids here (one per line) instead of stdout")
    s.set_defaults(func=run_sample)


def run_sample(args: argparse.Namespace) -> int:
    from forgetting.foundation.inputs import check_output_file
    from forgetting.instances.tasks import per_repository, read_id_file, stratified_sample

    if args.out:
        check_output_file(args.out, "--out")
    pool = read_id_file(Path(args.source), key="--from")
    if args.n > len(set(pool)):
        raise UserError(f"-n {args.n}: {args.source} holds only {len(set(pool))} distinct ids")
    ids = stratified_sample(pool, args.n, args.seed)
    text = "".join(f"{i}\n" for i in ids)
    if args.out:
        write_text(args.out, text)
        counts = ", ".join(f"{r} {n}" for r, n in per_repository(ids).items())
        print(f"{len(ids)} ids from {len(pool)} (seed {args.seed}) -> {args.out}: {counts}")
    else:
        print(text, end="")
    return 0
