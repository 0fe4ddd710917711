"""``forgetting preflight --gold``: do the instance images reproduce the tasks? For each task, its
gold patch must resolve and the unfixed repository must not.

That is the check images built for another architecture need before the study uses them (arm64
rebuilds of SWE-bench Verified report the same resolve sets for almost all instances, not all;
docs/cluster.md, *Architecture*): with the study's evaluation backend and images, each task's
dataset row ``patch`` (gold) is evaluated, then a *null patch* — one new, unrelated file, so the
repository's code is as the task found it, and the tests do run (an empty patch is never run:
its status is ``empty_patch``). ``evaluation.workers`` tasks at a time; results go to
``<results>/preflight/gold/<task>/``.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from forgetting.cluster.preflight import PreflightFailed
from forgetting.cluster.preflight.checks import Check
from forgetting.evaluate.backends import make_backend
from forgetting.evaluate.evaluate import evaluate_patch
from forgetting.foundation.atomic import write_text
from forgetting.foundation.errors import UserError
from forgetting.instances.load import load_instances
from forgetting.study.config import Study

#: a patch that changes no code: the tests run on the repository as the task found it
NULL_PATCH = (
    "diff --git a/.forgetting-null-patch b/.forgetting-null-patch\n"
    "new file mode 100644\n"
    "--- /dev/null\n"
    "+++ b/.forgetting-null-patch\n"
    "@@ -0,0 +1 @@\n"
    "+forgetting preflight --gold: the repository as the task found it\n"
)


def gold_checks(study: Study) -> list[Check]:

    settings = study.evaluation
    try:
        rows = load_instances(study)
        backend = make_backend(settings, study)
        backend.check(rows)
    except UserError as exc:
        return [Check("gold patches", False, str(exc))]
    base = study.results_dir / "preflight" / "gold"

    def check(task: str) -> Check:
        row = rows[task]
        gold = evaluate_patch(row, str(row.get("patch") or ""), backend, out_dir=base / task / "gold",
                              run_id=f"preflight/gold/{task}")
        null = evaluate_patch(row, NULL_PATCH, backend, out_dir=base / task / "null", run_id=f"preflight/null/{task}")
        failing = len(null.tests.get("FAIL_TO_PASS", {}).get("failure", []))
        ok = gold.resolved and null.status == "unresolved"
        detail = (f"gold patch {gold.status}, the unfixed repository {null.status} "
                  f"({failing} FAIL_TO_PASS tests failing) on the {settings.backend} backend")
        if not ok:
            detail += (f"; this image does not reproduce the task as SWE-bench grades it (logs under {base / task}): "
                       "leave the task out, or use the x86_64 image (docs/cluster.md, Architecture)")
        return Check(f"gold {task}", ok, detail)

    with ThreadPoolExecutor(max_workers=max(1, settings.workers)) as pool:
        out = list(pool.map(check, rows))
    passed = sum(c.ok for c in out)
    out.append(Check("gold patches", passed == len(out),
                     f"{passed} of {len(out)} tasks: the gold patch resolves, the unfixed repository does not"))
    return out


def gold_applies(study: Study) -> bool:
    """The workflow checks the gold patches before the study wherever it evaluates in the
    instance images (``evaluation.backend: apptainer``), whatever the route: an image that does
    not reproduce a task would grade every run of it wrongly."""
    return study.evaluation.backend == "apptainer"


def run_gold_in_job(study: Study, *, out: str | os.PathLike[str], log: str | os.PathLike[str]) -> None:
    """The workflow's gold-patch job: one line per task to ``log``; ``out`` written (atomically)
    only when every task's gold patch resolved and its unfixed repository did not, so a failure
    stops the batch jobs after it."""
    checks = gold_checks(study)
    text = "".join(ch.line() + "\n" for ch in checks)
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    Path(log).write_text(text, encoding="utf-8")
    print(text, end="", flush=True)
    failed = [ch for ch in checks if not ch.ok and ch.name != "gold patches"]
    if not checks[-1].ok:
        names = ", ".join(ch.name for ch in failed[:5]) + (", …" if len(failed) > 5 else "")
        raise PreflightFailed(f"gold patches: {len(failed)} of {len(checks) - 1} tasks failed ({names}); see {log}")
    write_text(out, text)
