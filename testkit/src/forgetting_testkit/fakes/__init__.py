"""Test doubles, named as such, for what cannot run on these machines. Each is also a script
(run by path, as the binary it replaces would be): the ``apptainer`` binary, ``nvidia-smi``, an
OpenAI-style model server (in process or as a script), ``vllm serve`` and Trae agent's ``trae-cli``.
:func:`install` puts one on a ``bin/`` directory under its real name, for a test's ``PATH``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
APPTAINER = HERE / "apptainer.py"
OPENAI_UPSTREAM = HERE / "openai_upstream.py"
NVIDIA_SMI = HERE / "nvidia_smi.py"
TRAE_CLI = HERE / "trae_cli.py"
VLLM = HERE / "vllm.py"


def install(double: Path, path: Path) -> Path:
    """An executable at ``path`` (its directory made) that runs the test double ``double`` with
    this interpreter, as the binary it stands for would be run."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{double}" "$@"\n')
    path.chmod(0o755)
    return path


def apptainer_calls(path: Path) -> list[list[str]]:
    """The argument lists the fake ``apptainer`` recorded in ``path`` (``FAKE_APPTAINER_CALLS``)."""
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
