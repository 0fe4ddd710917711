"""Shared fixtures: the repository root and a runner for the ``forgetting`` command line.

``ROOT``, ``cli_env()`` (the environment of a subprocess that imports this checkout's
``src/`` and ``testkit/src/``) and ``bin_path()`` live in :mod:`forgetting_testkit.checkout`."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from forgetting_testkit.checkout import ROOT, SRC, bin_path, cli_env

__all__ = ["ROOT", "SRC", "bin_path", "cli_env"]

#: fixture repositories (tests/data) hold their own tests, run only inside scratch copies
collect_ignore = ["data"]


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
