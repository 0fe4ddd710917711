"""One Snakemake at a time per study, and no lock left behind by a killed one (issue 25: two
copies at once; the ``--unlock`` a ``kill -9`` needed): forgetting.foundation.snakemake_lock.

The workflow here is the real Snakefile on a demo study, asked for its plan only (one short job).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from forgetting.foundation.snakemake_lock import SNAKEMAKE_LOCKS, hold_study_lock, remove_stale_locks
from forgetting.study.config import load_study
from forgetting_testkit.checkout import ROOT, bin_path, cli_env
from forgetting_testkit.runner import write_study

HOLDER = """
import sys, time
from forgetting.foundation.snakemake_lock import hold_study_lock
hold_study_lock(sys.argv[1], sys.argv[2])
print("held", flush=True)
time.sleep(300)
"""


def _plan(config: Path, *args: str) -> subprocess.CompletedProcess:
    results = load_study(config).results_dir
    argv = [bin_path("snakemake"), str(results / "plan/runs.parquet"), "--cores", "1", *args,
            "--configfile", str(config)]
    return subprocess.run(argv, cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=300)


def test_a_second_snakemake_of_a_running_study_stops_in_one_line(tmp_path):
    config = write_study(tmp_path)
    results = load_study(config).results_dir
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(results), str(ROOT)], env=cli_env(),
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        done = _plan(config)
        dry = _plan(config, "-n")  # a dry run starts nothing: it is not refused
    finally:
        holder.kill()
        holder.wait()
    assert done.returncode == 2, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert f"another Snakemake is running this study (pid {holder.pid}" in errors[0]
    assert not (results / "plan/runs.parquet").exists()
    assert dry.returncode == 0 and "This was a dry-run" in dry.stdout + dry.stderr, dry.stderr[-2000:]
    # and once it has ended (however: here SIGKILL), the study is free
    done = _plan(config)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (results / "plan/runs.parquet").is_file()


def test_a_lock_left_by_a_killed_snakemake_is_removed_and_the_workflow_goes_on(tmp_path):
    config = write_study(tmp_path)
    results = load_study(config).results_dir
    locks = ROOT / SNAKEMAKE_LOCKS
    locks.mkdir(parents=True, exist_ok=True)
    (locks / "907.input.lock").write_text(f"{ROOT / 'config/demo.yaml'}\n")
    (locks / "907.output.lock").write_text(f"{results / 'plan/runs.parquet'}\n{results / 'stats/effects.parquet'}\n")
    done = _plan(config)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "removed the Snakemake lock a killed workflow of this study left (907.input.lock, 907.output.lock" in \
        done.stderr
    assert (results / "plan/runs.parquet").is_file()


def test_only_the_locks_naming_the_study_are_removed(tmp_path):
    results = tmp_path / "study" / "results"
    locks = tmp_path / SNAKEMAKE_LOCKS
    locks.mkdir(parents=True)
    (locks / "0.input.lock").write_text("config/demo.yaml\n")
    (locks / "0.output.lock").write_text("study/results/plan/runs.parquet\n")  # relative to the working directory
    (locks / "1.input.lock").write_text("config/demo.yaml\n")
    (locks / "1.output.lock").write_text(f"{tmp_path / 'other' / 'results/plan/runs.parquet'}\n")
    (locks / "2.output.lock").write_text(f"{tmp_path / 'study' / 'results-2/x'}\n")  # a sibling, not below
    removed = hold_study_lock(results, tmp_path)
    assert [p.name for p in removed] == ["0.input.lock", "0.output.lock"]
    assert sorted(p.name for p in locks.iterdir()) == ["1.input.lock", "1.output.lock", "2.output.lock"]
    assert remove_stale_locks(results, tmp_path) == []
