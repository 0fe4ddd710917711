"""Shared fixtures: the repository root and a runner for the ``forgetting`` command line."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"

#: fixture repositories (tests/data) hold their own tests, run only inside scratch copies
collect_ignore = ["data"]


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for a subprocess that must import this checkout's package."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    if extra:
        env.update(extra)
    return env


def bin_path(name: str) -> str:
    """A console script of the interpreter running the tests (snakemake, ruff, …)."""
    return str(Path(sys.executable).parent / name)


@pytest.fixture
def repo_root() -> Path:
    return ROOT


@pytest.fixture
def run_cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run ``python -m forgetting ARGS`` from the repository root; returns the completed process."""

    def _run(*args: str, cwd: Path | None = None, timeout: float = 600, env: dict[str, str] | None = None):
        return subprocess.run(
            [sys.executable, "-m", "forgetting", *map(str, args)],
            cwd=cwd or ROOT,
            env=cli_env(env),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    return _run
