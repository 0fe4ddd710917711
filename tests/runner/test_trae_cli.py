"""The real Trae agent through the project's Trae runner: opt-in, where ``trae-cli`` is
installed (``FORGETTING_TRAE_CLI=/path/to/trae-cli``; ``scripts/install-trae-agent.sh PREFIX``
installs it as ``PREFIX/bin/trae-cli``, docs/runs.md).

Trae agent at the pinned commit runs the runner's command line and config file against the
scripted stand-in model behind the deletion proxy, on demo tasks checked out locally, for the
baseline and one deletion configuration; the demo evaluation then grades each patch. This is
what the test double (fakes/trae_cli.py, tests/runner/test_trae.py) cannot show: Trae's own
option parsing, config loading, openrouter client, tools, ``task_done`` handling under
``--must-patch`` and trajectory format, as the runner and every later stage read them.

Trae is not on PyPI and needs CPython 3.12; CI reaches only PyPI, Debian and npm, so there it
skips, saying so."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from forgetting.agents import TRAE_FINISH_TOOL
from forgetting.behaviour import label_run
from forgetting.evaluate import evaluate_batch, read_report
from forgetting.foundation.layout import CALLS, PATCH, TRAJECTORY, Layout
from forgetting.records.calllog import read_call_log
from forgetting.records.trae import parse_trae
from forgetting.run import run_batch
from forgetting.run.trae import CONFIG_FILE
from forgetting_testkit.runner import batch_of, run_dir, run_json, study_at

TRAE_CLI = os.environ.get("FORGETTING_TRAE_CLI", "")
SKIP = (
    "FORGETTING_TRAE_CLI is not set: the real Trae agent (CPython 3.12; from github.com/bytedance/"
    "trae-agent at the pinned commit, not on PyPI: scripts/install-trae-agent.sh PREFIX, then "
    "FORGETTING_TRAE_CLI=PREFIX/bin/trae-cli) runs only where it is installed"
)
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not TRAE_CLI, reason=SKIP)]

TASKS = ["demo__confkit-1", "demo__ledger-1"]
DELETED = "delayed-turn-tool_output-100"
CONFIGURATIONS = ("baseline", DELETED)
#: what Trae's bash tool says when two of its calls share the one shell session at once
BROKEN_SESSION = ("Session has not started", "bash has not returned")


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """Each task × (baseline, DELETED) run by the real trae-cli, then evaluated."""
    if not (Path(TRAE_CLI).is_file() and os.access(TRAE_CLI, os.X_OK)):
        pytest.fail(f"FORGETTING_TRAE_CLI={TRAE_CLI}: not an executable file")
    tmp = tmp_path_factory.mktemp("trae-cli")
    study = study_at(
        tmp,
        agents=["trae"],
        tasks={"ids": TASKS},
        configurations={"names": [DELETED]},
        agent={"turn_cap": 40, "command_timeout_s": 60, "fixed_test_durations": True,
               "trae": {"executable": TRAE_CLI}},
        evaluation={"backend": "local", "timeout_s": 300},
    )
    runs, evals = {}, {}
    for conf in CONFIGURATIONS:
        batch = batch_of(study, "trae", conf)
        batch_dir = Layout(study.results_dir).batch_dir(batch.key)
        runs[conf] = run_batch(study, batch, manifest=batch_dir / "runs.json", log=tmp / "batch.log", echo=False)
        evaluate_batch(study, batch, manifest=batch_dir / "eval.json", log=tmp / "evaluate.log")
        evals[conf] = json.loads((batch_dir / "eval.json").read_text())
    return study, runs, evals


def test_the_real_trae_cli_starts_as_the_image_test_starts_it():
    done = subprocess.run([TRAE_CLI, "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "run" in done.stdout and "Trae Agent" in done.stdout


def test_the_installs_python_imports_what_trae_cli_imports_at_startup():
    """The image's %test runs ``/opt/trae-agent/bin/python -c 'import docker, pexpect'``; an
    install by scripts/install-trae-agent.sh has the same ``bin/python`` beside ``bin/trae-cli``."""
    python = Path(TRAE_CLI).parent / "python"
    if not python.exists():
        pytest.skip(f"{python}: not an install by scripts/install-trae-agent.sh")
    done = subprocess.run([str(python), "-c", "import docker, pexpect, sys; print(sys.prefix)"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert Path(done.stdout.strip()).name == "venv", done.stdout  # the environment, not a bare CPython


@pytest.mark.parametrize("conf", CONFIGURATIONS)
@pytest.mark.parametrize("task", TASKS)
def test_real_trae_runs_end_submitted_by_task_done_and_resolve(finished, conf, task):
    study, runs, evals = finished
    rid = f"trae/{conf}/{task}/1"
    assert runs[conf]["runs"][rid]["status"] == "submitted", runs[conf]["runs"][rid]
    d = run_dir(study, rid)
    meta = run_json(study, rid)
    assert meta["exit_status"] == "Submitted" and meta["agent_exit_code"] == 0 and meta["error"] is None
    # the trajectory Trae wrote parses as every later stage parses it, and it ends by task_done
    traj = parse_trae(json.loads((d / TRAJECTORY).read_text()), d / TRAJECTORY)
    assert traj.success and traj.max_steps == 40
    assert traj.interactions[-1].tool_calls[-1].name == TRAE_FINISH_TOOL
    # every model call went through the proxy: one call-log record per Trae step
    log = read_call_log(d / CALLS)
    assert len(log.calls) == len(traj.interactions) == meta["turns"] == meta["agent_calls"] < 40
    # the runner's config keeps Trae's one bash session whole (no concurrent calls in it)
    config = (d / CONFIG_FILE).read_text()
    assert "parallel_tool_calls: false" in config
    assert not [r for r in traj.results().values() if any(b in (r.error or "") for b in BROKEN_SESSION)]
    patch = (d / PATCH).read_text()
    assert patch.startswith("diff --git ") and meta["patch_bytes"] == len(patch.encode())
    assert evals[conf]["runs"][rid] == {"status": "resolved", "resolved": True}
    assert read_report(d / "eval.json").resolved is True


@pytest.mark.parametrize("task", TASKS)
def test_deletion_reaches_real_trae_through_the_proxy(finished, task):
    study, _, _ = finished
    base, deleted = (run_dir(study, f"trae/{conf}/{task}/1") for conf in CONFIGURATIONS)
    assert not any(c.deleted for c in read_call_log(base / CALLS).calls)
    log = read_call_log(deleted / CALLS)
    rewritten = [p for c in log.calls for p in c.deleted]
    assert rewritten and {p.part for p in rewritten} == {"tool_output"}
    # Trae's requests reached the model with the outputs replaced (its own trajectory keeps them)
    sent = [m for c in log.calls for m in log.messages(c) if m.get("role") == "tool"]
    assert any(m.get("content") == "[tool output deleted]" for m in sent)
    assert label_run(deleted).summary["n_outputs_deleted"] > 0


def test_what_real_trae_saw_deleted_it_fetched_again(finished):
    study, _, _ = finished
    summaries = {task: label_run(run_dir(study, f"trae/{DELETED}/{task}/1")).summary for task in TASKS}
    assert sum(s["n_refetches_deleted"] for s in summaries.values()) > 0, summaries
    assert all(label_run(run_dir(study, f"trae/baseline/{t}/1")).summary["n_refetches"] == 0 for t in TASKS)
