"""The benchmarks still run (benchmarks/README.md): each with small arguments, as a user would
start it, printing its figures and its ratio against the naive way. A benchmark that no longer
runs against the package (a changed signature) fails here, not when someone measures."""

from __future__ import annotations

import subprocess
import sys

import pytest

from forgetting_testkit.checkout import ROOT, cli_env

CASES = {
    "cost.py": (["--calls", "20"], "speed ratio vs token-by-token naive"),
    "policies.py": (["--calls", "20", "--tokens", "5000"], "pure per call"),
    "stats.py": (["--resamples", "100", "--loop-resamples", "10"], "faster than the loop"),
    "proxy.py": (["--calls", "40", "--tokens", "10000"], "own work, delayed-token-both-50", "memoized (the proxy's)"),
    "proxy.py --served-bpe": (["--calls", "40", "--tokens", "10000", "--served-bpe"],
                              "prompts counted with the served model", "own work, baseline"),
    "served_count.py": (["--turns", "10"], "counts equal on all 10 calls"),
}


@pytest.mark.parametrize("name", CASES)
def test_the_benchmark_runs_and_prints_its_figures(name):
    args, *expected = CASES[name]
    script = ROOT / "benchmarks" / name.split()[0]
    env = {**cli_env(), "PYTHONPATH": f"{ROOT / 'src'}:{ROOT / 'testkit' / 'src'}"}
    done = subprocess.run([sys.executable, str(script), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert all(e in done.stdout for e in expected), done.stdout[-2000:]
    assert "ratio" in done.stdout
