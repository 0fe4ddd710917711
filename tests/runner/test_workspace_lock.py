"""Two studies on one machine sharing ``execution.scratch_dir`` (two clones, a study and its
endpoint variant) never delete each other's live workspaces: a run of the same id in the
second study waits for the first's lock — in another process, as batches run — then gets a
fresh checkout of its own; a lock held past what a run may take is one line naming it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from forgetting.run.outcome import InfraFailure
from forgetting.run.workspace import make_workspace, workspace_dir
from forgetting_testkit.checkout import ROOT, cli_env
from forgetting_testkit.runner import runner_settings

RUN_ID = "mini/baseline/demo__timekit-1/1"
TASK = "demo__timekit-1"


def _settings(scratch: Path, results: Path, run_timeout_s: int = 900):
    # the study's results directory is not a key of the runner's settings: each study's run
    # of RUN_ID wants the same workspace (its path is in the agent's tool output)
    return runner_settings(execution={"scratch_dir": str(scratch), "run_timeout_s": run_timeout_s},
                           study={"results_dir": str(results)},
                           dataset={"kind": "demo", "instances": str(ROOT / "resources/demo/tasks")})


SECOND = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from forgetting.run.workspace import make_workspace
    from forgetting_testkit.runner import runner_settings
    scratch, results, out, timeout = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
    settings = runner_settings(execution={"scratch_dir": scratch, "run_timeout_s": timeout},
                               study={"results_dir": results},
                               dataset={"kind": "demo", "instances": sys.argv[5]})
    t0 = time.monotonic()
    ws = make_workspace(settings, sys.argv[6], sys.argv[7])  # what it says goes to its log (stdout)
    out.write_text(json.dumps({"path": str(ws.path), "waited": time.monotonic() - t0,
                               "fresh": not (ws.path / "MARK").exists()}))
    ws.remove()
""")


def _second(tmp_path: Path, results: Path, run_timeout_s: int = 900) -> tuple[subprocess.Popen, Path]:
    out = tmp_path / f"second-{run_timeout_s}.json"
    proc = subprocess.Popen([sys.executable, "-c", SECOND, str(tmp_path / "scratch"), str(results), str(out),
                             str(run_timeout_s), str(ROOT / "resources/demo/tasks"), TASK, RUN_ID],
                            env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, out


def _wait_for_line(proc: subprocess.Popen, needle: str, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if needle in line:
            return line
        if not line and proc.poll() is not None:
            break
    raise AssertionError(f"no line with {needle!r} from the second study's run")


def test_a_second_study_waits_for_a_live_workspace_and_never_deletes_it(tmp_path):
    scratch = tmp_path / "scratch"
    first = make_workspace(_settings(scratch, tmp_path / "study-a"), TASK, RUN_ID)
    mark = first.path / "MARK"
    mark.write_text("the first study's agent is working here")
    try:
        proc, out = _second(tmp_path, tmp_path / "study-b")
        try:
            line = _wait_for_line(proc, "waiting for it")
        finally:
            assert mark.is_file(), "the second study deleted the first's live workspace"
        assert f"in use by run {RUN_ID} (pid " in line and ".lock" in line
        time.sleep(1.0)  # the second goes on waiting: the first's checkout is untouched
        assert proc.poll() is None and mark.read_text().startswith("the first study's")
        assert (first.path / ".git").is_dir()
    finally:
        first.remove()
    proc.wait(timeout=120)
    result = json.loads(out.read_text())
    assert result["path"] == str(workspace_dir(_settings(scratch, tmp_path / "study-b"), RUN_ID))
    assert result["fresh"] and result["waited"] >= 1.0


def test_a_lock_held_past_a_runs_time_is_an_infrastructure_failure_naming_it(tmp_path):
    scratch = tmp_path / "scratch"
    first = make_workspace(_settings(scratch, tmp_path / "study-a"), TASK, RUN_ID)
    try:
        from forgetting.run import workspace

        with pytest.raises(InfraFailure, match=r"still in use by run .* after 0.3 s \(lock .*\.lock\); another "
                                               r"study sharing execution.scratch_dir"):
            workspace.lock_workspace(workspace_dir(_settings(scratch, tmp_path / "b"), RUN_ID), RUN_ID,
                                     wait_s=0.3, say=lambda m: None, poll_s=0.05)
        assert (first.path / ".git").is_dir()
    finally:
        first.remove()


def test_a_killed_runs_lock_is_released_and_its_leftover_removed(tmp_path):
    """A run killed with SIGKILL holds no lock (the kernel drops it): the next run of that id
    goes on at once and removes what the killed one left."""
    scratch = tmp_path / "scratch"
    proc, _ = _second(tmp_path, tmp_path / "study-a")
    proc.wait(timeout=120)  # it made its workspace and removed it; now a leftover of a kill:
    dest = workspace_dir(_settings(scratch, tmp_path / "study-a"), RUN_ID)
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from pathlib import Path
        from forgetting.run.workspace import lock_workspace
        lock_workspace(Path({str(dest)!r}), {RUN_ID!r}, wait_s=5)
        Path({str(dest)!r}).mkdir(parents=True, exist_ok=True)
        (Path({str(dest)!r}) / "LEFTOVER").write_text("x")
        print("holding", flush=True)
        time.sleep(600)
    """)], env=cli_env(), stdout=subprocess.PIPE, text=True)
    try:
        _wait_for_line(holder, "holding")
    finally:
        holder.kill()
        holder.wait()
    t0 = time.monotonic()
    ws = make_workspace(_settings(scratch, tmp_path / "study-b"), TASK, RUN_ID)
    try:
        assert time.monotonic() - t0 < 30 and not (ws.path / "LEFTOVER").exists() and (ws.path / ".git").is_dir()
    finally:
        ws.remove()
