"""Interrupted and failed runs: a run process killed with SIGKILL mid-way, a model server that
dies mid-batch, a proxy or a workspace that cannot be made. None of them leaves a run that
looks finished; the batch fails naming exactly those runs, and the next invocation redoes
them while the finished runs stay untouched."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from forgetting.foundation.layout import RUN_JSON, Layout
from forgetting.run import RunsNotFinished, run_batch
from forgetting.run.rundir import stale_dirs
from forgetting_testkit.checkout import ROOT, cli_env
from forgetting_testkit.runner import (
    FAKE_VLLM_MODEL,
    batch_of,
    ok_calls,
    run_dir,
    run_json,
    snapshot,
    study_at,
    write_study,
)

pytestmark = pytest.mark.slow

TASK = "demo__confkit-1"


def _three_runs(tmp: Path, **extra):
    """mini on one task, three baseline repeats, one at a time."""
    return study_at(tmp, repeats={"baseline": 3, "deletion": 1}, **extra)


def _wait_for_run_in_flight(root: Path, process: subprocess.Popen[str], calls: int, timeout: float = 60) -> Path:
    """The temporary directory of a run that has made at least ``calls`` model calls."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        assert process.poll() is None, process.communicate()
        for temp in root.glob(f"runs/mini/baseline/{TASK}/.*.tmp-*"):
            log = temp / "calls.jsonl"
            if log.is_file() and log.read_text().count('"type":"call"') >= calls:
                return temp
        time.sleep(0.01)
    raise AssertionError("no run got that far")


def test_a_run_killed_mid_way_is_redone_cleanly_and_finished_runs_stay_untouched(tmp_path):
    config = write_study(tmp_path, repeats={"baseline": 3, "deletion": 1})
    study = _three_runs(tmp_path)
    batch = batch_of(study, "mini", "baseline")
    results = study.results_dir
    cmd = [sys.executable, "-m", "forgetting", "run-batch", str(config), "--batch", batch.key]
    process = subprocess.Popen(cmd, cwd=ROOT, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    # let the first run finish, then kill the second one's process after its third model call
    first = run_dir(study, batch.runs[0].run_id)
    end = time.monotonic() + 120
    while not (first / RUN_JSON).exists():
        assert time.monotonic() < end and process.poll() is None, process.communicate()
        time.sleep(0.01)
    temp = _wait_for_run_in_flight(results, process, calls=3)
    victim_id = f"mini/baseline/{TASK}/{temp.name.split('.')[1]}"
    pid = int(temp.name.rsplit("-", 1)[1])
    os.kill(pid, signal.SIGKILL)
    _, err = process.communicate(timeout=300)
    assert process.returncode == 2, err
    assert f"the run process was killed by signal 9 before it reported an outcome ({victim_id})" in err
    victim = run_dir(study, victim_id)
    assert not victim.exists() and stale_dirs(victim) == [temp]  # nothing that looks finished
    finished = [r.run_id for r in batch.runs if r.run_id != victim_id]
    assert all((run_dir(study, rid) / RUN_JSON).is_file() for rid in finished)
    before = {rid: snapshot(run_dir(study, rid)) for rid in finished}
    assert not (Layout(results).batch_dir(batch.key) / "runs.json").exists()

    again = subprocess.run(cmd, cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert "1 of 3 runs to do" not in again.stderr and "2 of 3 runs finished before; kept" in again.stderr
    assert (victim / RUN_JSON).is_file() and stale_dirs(victim) == []
    assert run_json(study, victim_id)["status"] == "submitted"
    calls = ok_calls(victim)
    assert [c["index"] for c in calls] == list(range(1, len(calls) + 1))  # a fresh call log, not a resumed one
    assert {rid: snapshot(run_dir(study, rid)) for rid in finished} == before


def test_a_model_server_that_dies_mid_batch_leaves_its_runs_unfinished(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_SUBMIT_AT", "3")  # each run: 3 model calls, then it submits
    monkeypatch.setenv("FAKE_VLLM_DIE_AFTER", "4")  # the server crashes on the 5th completion
    study = _three_runs(tmp_path, model=FAKE_VLLM_MODEL)
    batch = batch_of(study, "mini", "baseline")
    first, second, third = (r.run_id for r in batch.runs)
    with pytest.raises(RunsNotFinished) as failure:
        run_batch(study, batch, log=tmp_path / "batch.log", echo=False)
    message = str(failure.value)
    assert "2 of 3 runs did not finish" in message
    # each reason once, with the runs it stopped
    assert re.search(rf"stopped: model server exited with status 1 \(see [^)]*\) \({re.escape(second)}\)", message)
    assert re.search(rf"not started: model server exited with status 1 \(see [^)]*\) \({re.escape(third)}\)",
                     message)
    assert run_json(study, first)["status"] == "submitted" and run_json(study, first)["turns"] == 3
    assert not run_dir(study, second).exists() and not run_dir(study, third).exists()
    assert "dying on completion 5" in (Layout(study.results_dir).batch_dir(batch.key) / "model_server.log").read_text()

    before = snapshot(run_dir(study, first))
    monkeypatch.delenv("FAKE_VLLM_DIE_AFTER")
    document = run_batch(study, batch, echo=False)
    assert {rid: e["status"] for rid, e in document["runs"].items()} == dict.fromkeys((first, second, third),
                                                                                      "submitted")
    assert snapshot(run_dir(study, first)) == before


def test_a_proxy_or_workspace_that_cannot_be_made_fails_only_that_run(tmp_path, monkeypatch):
    import forgetting.run.execute
    import forgetting.run.workspace

    monkeypatch.setenv("FAKE_VLLM_SUBMIT_AT", "2")
    study = study_at(tmp_path, model=FAKE_VLLM_MODEL, tasks={"ids": [TASK, "demo__ledger-1"]},
                     repeats={"baseline": 2, "deletion": 1})
    batch = batch_of(study, "mini", "baseline")
    real_proxy, real_checkout = forgetting.run.execute.start_proxy, forgetting.run.workspace.check_out_demo_task

    def proxy_fails_for_repeat_2(upstream, deletion, seed, log_dir, run_id, **kw):
        if run_id == f"mini/baseline/{TASK}/2":
            raise OSError(98, "Address already in use")
        return real_proxy(upstream, deletion, seed, log_dir, run_id, **kw)

    def checkout_fails_for_ledger(tasks_dir, instance_id, dest):
        if instance_id == "demo__ledger-1":
            raise OSError(28, "No space left on device")
        return real_checkout(tasks_dir, instance_id, dest)

    # the run processes are forked from this one, so they see the patched functions (patched
    # where the runner looks them up)
    monkeypatch.setattr(forgetting.run.execute, "start_proxy", proxy_fails_for_repeat_2)
    monkeypatch.setattr(forgetting.run.workspace, "check_out_demo_task", checkout_fails_for_ledger)
    with pytest.raises(RunsNotFinished) as failure:
        run_batch(study, batch, echo=False)
    message = str(failure.value)
    assert "3 of 4 runs did not finish" in message
    assert f"proxy: could not start: [Errno 98] Address already in use (mini/baseline/{TASK}/2)" in message
    assert re.search(r"workspace: could not check out demo__ledger-1[^;]*\(mini/baseline/demo__ledger-1/1, "
                     r"mini/baseline/demo__ledger-1/2\)", message)
    assert run_json(study, f"mini/baseline/{TASK}/1")["status"] == "submitted"
    for rid in (f"mini/baseline/{TASK}/2", "mini/baseline/demo__ledger-1/1", "mini/baseline/demo__ledger-1/2"):
        assert not run_dir(study, rid).exists()


def _processes_mentioning(text: str) -> list[int]:
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text.encode() in cmdline.read_bytes():
                pids.append(int(cmdline.parent.name))
        except OSError:
            continue
    return pids


def _port_open(port: int) -> bool:
    import socket

    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_a_stopped_batch_leaves_no_run_process_and_no_model_server(tmp_path, how):
    config = write_study(tmp_path, repeats={"baseline": 3, "deletion": 1})
    study = _three_runs(tmp_path)
    batch = batch_of(study, "mini", "baseline")
    cmd = [sys.executable, "-m", "forgetting", "run-batch", str(config), "--batch", batch.key]
    process = subprocess.Popen(cmd, cwd=ROOT, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    temp = _wait_for_run_in_flight(study.results_dir, process, calls=2)
    server_log = Layout(study.results_dir).batch_dir(batch.key) / "model_server.log"
    port = int(server_log.read_text().split("--port ", 1)[1].split()[0])
    assert _port_open(port) and len(_processes_mentioning(str(config))) >= 2  # the batch and its run
    process.send_signal(how)
    process.communicate(timeout=60)
    assert process.returncode == (143 if how == signal.SIGTERM else -9)
    end = time.monotonic() + 20
    while (_processes_mentioning(str(config)) or _port_open(port)) and time.monotonic() < end:
        time.sleep(0.1)
    assert _processes_mentioning(str(config)) == [] and not _port_open(port)
    victim = run_dir(study, f"mini/baseline/{TASK}/{temp.name.split('.')[1]}")
    assert not (victim / RUN_JSON).exists()


def test_runs_over_their_time_limit_are_finished_as_errors(tmp_path, monkeypatch):
    from forgetting.study.runner import RunnerSettings

    monkeypatch.setenv("FAKE_VLLM_CALL_DELAY", "0.6")
    study = study_at(tmp_path, model=FAKE_VLLM_MODEL, repeats={"baseline": 2, "deletion": 1},
                     execution={"concurrency": 2, "run_timeout_s": 1, "scratch_dir": str(tmp_path / "s")})
    batch = batch_of(study, "mini", "baseline")
    # the agent's own limit: mini-swe-agent stops before the call that would start after 1 s
    document = run_batch(study, batch, echo=False)
    for run in batch.runs:
        meta = run_json(study, run.run_id)
        assert (meta["status"], meta["exit_status"]) == ("error", "TimeExceeded")
        # calls start at 0 s and ~0.6 s (later on a loaded machine), none after 1 s
        assert meta["turns"] in (1, 2) and meta["turns"] == document["runs"][run.run_id]["turns"]
    # a run stuck in one step past the limit: killed by the batch, recorded as an error
    monkeypatch.setenv("FAKE_VLLM_CALL_DELAY", "30")
    monkeypatch.setattr(RunnerSettings, "kill_after_s", property(lambda self: 2.0))
    forced = study_at(tmp_path, model=FAKE_VLLM_MODEL, repeats={"baseline": 2, "deletion": 1}, force_rerun=True,
                      execution={"concurrency": 2, "run_timeout_s": 1, "scratch_dir": str(tmp_path / "s")})
    started = time.monotonic()
    run_batch(forced, batch_of(forced, "mini", "baseline"), echo=False)
    assert time.monotonic() - started < 20
    for run in batch.runs:
        meta = run_json(study, run.run_id)
        assert (meta["status"], meta["exit_status"], meta["turns"]) == ("error", "TimeExceeded", 0)
        assert meta["error"].startswith("killed after 2 s")
