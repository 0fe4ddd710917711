"""The repository checkout the tests and benchmarks run in: its root, and the environment of a
subprocess that must import this checkout's packages (``src/`` and ``testkit/src/``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SRC = ROOT / "src"
TESTKIT_SRC = ROOT / "testkit" / "src"


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for a subprocess that must import this checkout's package."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(TESTKIT_SRC), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    if extra:
        env.update(extra)
    return env


def bin_path(name: str) -> str:
    """A console script of the interpreter running the tests (snakemake, ruff, …)."""
    return str(Path(sys.executable).parent / name)
