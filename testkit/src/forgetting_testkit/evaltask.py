"""The evaluation tests' fixture task (``tests/data/evaltask``): a tiny repository with a bug
(``mean`` uses floor division), its gold patch, test patch, FAIL_TO_PASS and PASS_TO_PASS,
and patches that go wrong in each way an evaluation must report; ``study_file``, a demo-kind
study of it (a fixture), and ``make_run``, a run directory of that study with a given patch."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from swebench.image_builder.image_spec import ImageSpec

from forgetting.foundation.layout import Layout
from forgetting_testkit.checkout import ROOT
from forgetting_testkit.trajectories import write_run_json

DATA = ROOT / "tests" / "data" / "evaltask"
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
        # the published image's name, as swebench's ImageSpec gives it (an x86_64 image)
        image=ImageSpec(instance_id="demo__calc-1", dockerfile="-", namespace="swebench").name,
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


def demo_study(tmp_path: Path, monkeypatch: Any, *, other_tasks: tuple[str, ...] = (), repeats: int = 5) -> Path:
    """A demo-kind study of the fixture task, and of ``other_tasks`` (its row under other ids):
    ``repeats`` baseline runs of one agent, local backend; its config file."""
    row = instance(tmp_path)
    row["environment_setup_commit"] = row["base_commit"]  # the demo-task schema requires a commit hash
    tasks = tmp_path / "tasks"
    ids = [row["instance_id"], *other_tasks]
    for iid in ids:
        (tasks / iid).mkdir(parents=True)
        (tasks / iid / "instance.json").write_text(json.dumps({**row, "instance_id": iid}))
    config = {
        "study": {"name": "t", "seed": 1, "results_dir": str(tmp_path / "results")},
        "agents": ["mini"],
        "tasks": {"ids": ids},
        "dataset": {"kind": "demo", "instances": str(tasks)},
        "repeats": {"baseline": repeats},
        "configurations": {"names": "none"},
        "model": {"backend": "scripted", "name": "scripted"},
        "evaluation": {"backend": "local", "timeout_s": 60},
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(config))
    # every demo task's checkout is the fixture task's (one line in forgetting.evaluate.local)
    monkeypatch.setattr(
        "forgetting.evaluate.local.checkout_demo_task",
        lambda tasks_dir, iid, dest: build_repo(dest),
    )
    return path


@pytest.fixture
def study_file(tmp_path, monkeypatch):
    """A demo-kind study of the fixture task: 5 baseline runs of one agent, local backend."""
    return demo_study(tmp_path, monkeypatch)


def make_run(study, run, patch: str | None, finished: bool = True) -> Path:
    run_dir = Layout(study.results_dir).run_dir(run.run_id)
    run_dir.mkdir(parents=True)
    if patch is not None:
        (run_dir / "patch.diff").write_text(patch)
    if finished:  # a whole record: the evaluation reads it before the patch
        write_run_json(run_dir, seed=run.seed)
    return run_dir
