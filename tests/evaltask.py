"""The evaluation tests' fixture task (``tests/data/evaltask``): a tiny repository with a bug
(``mean`` uses floor division), its gold patch, test patch, FAIL_TO_PASS and PASS_TO_PASS,
and patches that go wrong in each way an evaluation must report."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data" / "evaltask"
INSTANCE_ID = "demo__calc-1"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "fixture",
    "GIT_AUTHOR_EMAIL": "fixture@example.invalid",
    "GIT_COMMITTER_NAME": "fixture",
    "GIT_COMMITTER_EMAIL": "fixture@example.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00+00:00",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+00:00",
}


def patch(name: str) -> str:
    """One of the fixture patches: gold, wrong, regress, hang, cheat, stale (or test)."""
    return (DATA / f"{name}.patch").read_text(encoding="utf-8")


def build_repo(dest: Path) -> str:
    """``dest`` as a git repository at the task's base commit; returns the commit id."""
    shutil.copytree(DATA / "repo", dest)
    env = {**os.environ, **GIT_ENV}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "base"]):
        subprocess.run(["git", *args], cwd=dest, env=env, check=True)
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=dest, capture_output=True, text=True, check=True
    ).stdout.strip()


def checkout(instance: dict[str, Any], dest: Path) -> None:
    """The local backend's checkout for the fixture task."""
    build_repo(dest)


def instance(tmp: Path) -> dict[str, Any]:
    """The task's dataset row, with the base commit a fresh build of the repository has."""
    row = json.loads((DATA / "instance.json").read_text(encoding="utf-8"))
    row["base_commit"] = build_repo(tmp / "probe")
    row["patch"] = patch("gold")
    row["test_patch"] = patch("test")
    return row


def swebench_row(tmp: Path) -> dict[str, Any]:
    """The task as a swebench 5.x dataset row: with the image, log parser, evaluation type and
    an eval script of the shape SWE-bench's rows carry (reset the test files, apply the test
    patch from a here-document, run the tests between the markers, reset again)."""
    row = instance(tmp)
    base, files = row["base_commit"], "tests/test_calc.py"
    row.update(
        image="swebench/sweb.eval.x86_64.demo_1776_calc-1:latest",
        log_parser="parse_log_pytest",
        eval_type="pass_and_fail",
        eval_script="\n".join(
            [
                "#!/bin/bash",
                "set -uxo pipefail",
                "cd /testbed",
                f"git checkout {base} {files}",
                "git apply -v - <<'EOF_114329324912'",
                row["test_patch"].rstrip("\n"),
                "EOF_114329324912",
                ": '>>>>> Start Test Output'",
                "python -m pytest -rA tests/test_calc.py tests/test_rounding.py",
                ": '>>>>> End Test Output'",
                f"git checkout {base} {files}",
                "",
            ]
        ),
    )
    return row
