"""The demo profile's plain Snakemake command run as a test would run it from a terminal, and what
a study reports, for the end-to-end workflow tests (tests/workflow/)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from forgetting_testkit.checkout import ROOT, bin_path, cli_env
from forgetting_testkit.runner import write_study


def snakemake(config: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """The plain command of the demo's profile (rerun-incomplete), in a process group of its own
    (so a test can signal the whole group, as a terminal does); ``env``: variables to add."""
    return subprocess.Popen(
        [bin_path("snakemake"), "--cores", "2", "--configfile", str(config), "--rerun-incomplete", *args],
        cwd=ROOT, env=cli_env(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )


def finish(proc: subprocess.Popen[str], timeout: float = 900) -> str:
    """Wait for ``proc``; it must succeed. Its output."""
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out[-4000:]
    return out


def outputs(results: Path) -> dict[str, bytes]:
    """What the study reports: every dataset but the wall-clock timings, statistics, tables, figures."""
    files = {}
    for sub in ("datasets", "stats", "tables", "figures"):
        for path in sorted((results / sub).rglob("*")):
            if path.is_file() and path.name != "timings.parquet":
                files[str(path.relative_to(results))] = path.read_bytes()
    return files


def three_run_study(tmp: Path, scratch: Path) -> Path:
    """A narrowed demo study under ``tmp`` (mini-text, one task, the baseline twice and one
    deletion configuration: three runs in two batches), its workspaces under ``scratch`` (a
    run's workspace path appears in its tool outputs, so in its prompts' tokens: studies whose
    outputs are compared share one)."""
    return write_study(
        tmp,
        agents=["mini-text"],
        tasks={"ids": ["demo__confkit-1"]},
        repeats={"baseline": 2, "deletion": 1},
        configurations={"names": ["immediate-token-both-75"]},
        agent={"turn_cap": 40, "command_timeout_s": 60, "fixed_test_durations": True},
        execution={"concurrency": 1, "scratch_dir": str(scratch)},
        statistics={"resamples": 200},
    )
