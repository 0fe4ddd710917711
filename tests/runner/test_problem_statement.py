"""Real problem statements: the runner gives each agent the row's ``problem_statement`` of the
study's 100 real SWE-bench Verified rows exactly as SWE-bench's own runners do.

- mini-swe-agent's ``run/benchmarks/swebench.py`` (2.4.6): ``task = instance["problem_statement"]``,
  ``agent.run(task)``, which renders it as ``{{task}}`` into ``swebench.yaml``'s
  ``instance_template``: the first user message holds the statement byte for byte.
- Trae's ``evaluation/utils.py`` (its SWE-bench config, commit e839e559): the statement written
  unchanged to ``problem_statement.txt`` (``open(..., "w", encoding="utf-8")``), which
  ``trae-cli run --file`` reads with ``Path.read_text()`` (``trae_agent/cli.py``) — so Trae sees it
  with its ``\\r\\n`` turned into ``\\n`` by Python's universal newlines, there as here.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from forgetting.foundation.layout import TRAJECTORY
from forgetting.instances.tasks import read_id_file
from forgetting.run.context import RunContext
from forgetting.run.mini import run_mini
from forgetting.run.trae import TASK_FILE, run_trae
from forgetting.run.workspace import Workspace, problem_statement
from forgetting.study.plan import plan_runs
from forgetting_testkit.checkout import ROOT
from forgetting_testkit.runner import FAKE_TRAE, runner_settings, study_at
from forgetting_testkit.shared_data import VERIFIED_PARQUET, shared_file

UNREACHABLE = "http://127.0.0.1:9/v1"  # the agents' first model call fails: what they were given is recorded


@pytest.fixture(scope="module")
def statements() -> dict[str, str]:
    """The study's 100 rows' problem statements, read straight from the file with pyarrow."""
    study = set(read_id_file(ROOT / "resources/tasks/swe-bench-verified-100.txt", key="tasks"))
    table = pq.read_table(shared_file(VERIFIED_PARQUET), columns=["instance_id", "problem_statement"])
    return {r["instance_id"]: r["problem_statement"] for r in table.to_pylist() if r["instance_id"] in study}


def _settings(**agent):
    return runner_settings(dataset={"kind": "swebench", "instances": str(shared_file(VERIFIED_PARQUET))},
                           agent={"turn_cap": 2, **agent})


def test_the_runner_reads_every_study_rows_statement_unchanged(statements):
    assert len(statements) == 100
    settings = _settings()
    for task, text in statements.items():
        assert problem_statement(settings, task) == text, task
    # what would change if the runner tidied them: half carry the issue's \r\n, all end in a newline
    assert sum("\r\n" in t for t in statements.values()) >= 40
    assert all(t.endswith("\n") for t in statements.values())


def _ctx(tmp_path: Path, agent: str, task: str, settings) -> RunContext:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    out, scratch = tmp_path / "out", tmp_path / "scratch"
    out.mkdir()
    scratch.mkdir()
    run = dataclasses.replace(plan_runs(study_at(tmp_path / "study"))[0], agent=agent, task=task)
    return RunContext(run, settings, out, scratch, Workspace(task, path=repo),
                      problem_statement(settings, task), UNREACHABLE)


@pytest.mark.slow  # litellm and mini-swe-agent in the test process
def test_mini_gets_the_statement_as_its_swebench_runner_renders_it(statements, tmp_path, monkeypatch):
    monkeypatch.setenv("MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT", "1")
    task = next(t for t, s in statements.items() if "\r\n" in s)
    ctx = _ctx(tmp_path, "mini", task, _settings())
    run_mini(ctx)
    messages = json.loads((ctx.out / TRAJECTORY).read_text(encoding="utf-8"))["messages"]
    user = messages[1]
    assert user["role"] == "user"
    # swebench.yaml's instance_template around {{task}}, the statement byte for byte inside
    assert f"<pr_description>\nConsider the following PR description:\n{statements[task]}\n</pr_description>" in (
        user["content"])


def test_trae_gets_the_statement_as_its_evaluation_script_hands_it_over(statements, tmp_path):
    task = next(t for t, s in statements.items() if "\r\n" in s)
    ctx = _ctx(tmp_path, "trae", task, _settings(trae={"executable": str(FAKE_TRAE)}))
    run_trae(ctx)
    # Trae's evaluation: problem_statement.txt written in text mode, read back by trae-cli
    theirs = tmp_path / "problem_statement.txt"
    with open(theirs, "w", encoding="utf-8") as fh:
        fh.write(statements[task])
    ours = ctx.out / TASK_FILE
    assert ours.read_bytes() == theirs.read_bytes() == statements[task].encode("utf-8")
    seen = json.loads((ctx.out / TRAJECTORY).read_text(encoding="utf-8"))["task"]
    assert seen == Path(theirs).read_text() == statements[task].replace("\r\n", "\n")
