"""Test doubles, named as such, for what cannot run on these machines. Each is also a script
(run by path, as the binary it replaces would be): the ``apptainer`` binary, ``nvidia-smi``, an
OpenAI-style model server (in process or as a script), ``vllm serve`` and Trae agent's ``trae-cli``.
:func:`install` puts one on a ``bin/`` directory under its real name, for a test's ``PATH``."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
APPTAINER = HERE / "apptainer.py"
OPENAI_UPSTREAM = HERE / "openai_upstream.py"
NVIDIA_SMI = HERE / "nvidia_smi.py"
TRAE_CLI = HERE / "trae_cli.py"
VLLM = HERE / "vllm.py"


def install(script: Path, bin_dir: Path, name: str) -> Path:
    """``bin_dir/name``: a shell wrapper that runs ``script`` with this interpreter."""
    import sys

    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / name
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{script}" "$@"\n')
    exe.chmod(0o755)
    return exe
