"""A batch runs once at a time. A second copy of a batch that is still running — a Slurm job left
running by a Snakemake that was killed (kill -9, a lost login node), then submitted again by the
next Snakemake — stops in one line naming the first, before it removes anything: its first step
would otherwise delete the first copy's runs in progress (their temporary directories)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from forgetting.foundation.layout import Layout
from forgetting.run import run_batch
from forgetting.run.batch import BATCH_LOCK, BatchBusy
from forgetting_testkit.checkout import cli_env
from forgetting_testkit.runner import batch_of, run_json, study_at

pytestmark = pytest.mark.slow

#: another process holding a lock, as a running batch does (the package's own lock)
HOLDER = ("import sys, time\nfrom pathlib import Path\nfrom forgetting.foundation import locks\n"
          "locks.take(Path(sys.argv[1]), 'mini/baseline/b000')\nprint('held', flush=True)\nsys.stdin.read()\n")


def test_a_second_copy_of_a_running_batch_stops_naming_the_first_and_removes_nothing(tmp_path):
    study = study_at(tmp_path, repeats={"baseline": 1, "deletion": 1})
    batch = batch_of(study, "mini", "baseline")
    (run,) = batch.runs
    layout = Layout(study.results_dir)
    in_progress = layout.run_dir(run.run_id).parent / f".{layout.run_dir(run.run_id).name}.tmp-424242"
    in_progress.mkdir(parents=True)
    (in_progress / "calls.jsonl").write_text("{}\n")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(layout.batch_dir(batch.key) / BATCH_LOCK)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=cli_env())
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(BatchBusy) as busy:
            run_batch(study, batch, log=tmp_path / "second.log", echo=False)
        message = str(busy.value)
        assert "\n" not in message
        assert message.startswith(f"{batch.key}: this batch is running already (pid {holder.pid} on ")
        assert "wait for it to end" in message and "scancel" in message
        assert (in_progress / "calls.jsonl").read_text() == "{}\n"  # the first copy's run untouched
        assert not (layout.batch_dir(batch.key) / "model_server.log").exists()  # no server started
    finally:
        holder.communicate("")
    # the first copy gone (however it ended: the kernel freed its lock), the same command goes on
    document = run_batch(study, batch, echo=False)
    assert document["runs"][run.run_id]["status"] == run_json(study, run.run_id)["status"]
    assert not in_progress.exists()  # now a leftover: removed


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_a_lock_file_that_is_a_link_or_no_plain_file_is_one_line_and_nothing_is_written_through_it(tmp_path, kind):
    import os

    from forgetting.foundation import locks
    from forgetting.foundation.errors import UserError

    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    lock = tmp_path / "batch" / BATCH_LOCK
    lock.parent.mkdir()
    if kind == "symlink":
        lock.symlink_to(target)
    else:
        os.mkfifo(lock)
    with pytest.raises(UserError) as error:
        locks.take(lock, "mini/baseline/b000")
    assert str(error.value).startswith(f"{lock}: ") and "remove it" in str(error.value)
    assert "\n" not in str(error.value)
    assert target.read_text() == "keep me\n"


def test_a_file_system_without_locks_says_so_in_the_batch_log_and_the_batch_goes_on(tmp_path, monkeypatch):
    import errno

    from forgetting.foundation import locks

    def no_lock(path, note=""):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(locks, "take", no_lock)
    study = study_at(tmp_path, repeats={"baseline": 1, "deletion": 1})
    batch = batch_of(study, "mini", "baseline")
    document = run_batch(study, batch, log=tmp_path / "batch.log", echo=False)
    (run,) = batch.runs
    assert document["runs"][run.run_id]["status"] == run_json(study, run.run_id)["status"]
    assert f"{batch.key}: no lock on " in (tmp_path / "batch.log").read_text()
    assert "(No locks available): do not run this batch twice at once" in (tmp_path / "batch.log").read_text()
