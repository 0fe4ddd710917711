"""``forgetting demo setup``: check out every demo task as a git repository at its base commit."""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path
from typing import Any

from forgetting.foundation.errors import ResourceError, UserError


def add_parser(sub: Any) -> None:
    p = sub.add_parser("demo", help="the embedded demo's tasks: check them out", description=__doc__)
    dsub = p.add_subparsers(dest="demo_command", required=True, metavar="ACTION")
    s = dsub.add_parser("setup", help="check out every demo task (buggy base commit, without its tests)")
    s.add_argument("--tasks", default="resources/demo/tasks", help="the demo task directory")
    s.add_argument("--dest", default="results/demo/repos", help="one repository per task is made here")
    s.add_argument("--force", action="store_true",
                   help="replace checkouts that are not at their base commit (their changes are lost)")
    s.set_defaults(func=run_setup)


def run_setup(args: argparse.Namespace) -> int:
    from forgetting.demo.tasks import checkout, demo_task_ids, is_clean_checkout, load_instance, load_solution

    tasks = Path(args.tasks)
    if not tasks.is_dir():
        raise ResourceError(f"--tasks: demo task directory not found: {tasks}")
    ids = demo_task_ids(tasks)
    if not ids:
        raise ResourceError(f"--tasks: no demo tasks (*/instance.json) in {tasks}")
    dest = Path(args.dest)
    # check every task before touching anything
    instances = {i: load_instance(tasks, i) for i in ids}
    for i in ids:
        load_solution(tasks, i)
    stale = []
    for i in ids:
        repo = dest / i
        if repo.exists() and not is_clean_checkout(repo, instances[i]["base_commit"]):
            stale.append(i)
    if stale and not args.force:
        more = f" (and {len(stale) - 3} more)" if len(stale) > 3 else ""
        raise UserError(
            f"{dest}: not a clean checkout of its base commit: {', '.join(stale[:3])}{more};"
            " rerun with --force to replace (their changes are lost)"
        )
    for i in ids:
        repo = dest / i
        base = instances[i]["base_commit"]
        if repo.exists() and i not in stale:
            print(f"{i}  {base[:12]}  {repo}  (already checked out)")
            continue
        if repo.exists():
            # build the replacement first, so a failure leaves the old checkout in place
            with tempfile.TemporaryDirectory(prefix=f".{i}.", dir=dest) as tmp:
                fresh = checkout(tasks, i, Path(tmp) / i)
                shutil.rmtree(repo)
                fresh.rename(repo)
            print(f"{i}  {base[:12]}  {repo}  (replaced)")
            continue
        checkout(tasks, i, repo)
        print(f"{i}  {base[:12]}  {repo}")
    return 0
