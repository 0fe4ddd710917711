"""Test doubles, named as such, for what cannot run on these machines. Each is also a script
(run by path, as the binary it replaces would be): the ``apptainer`` binary, an OpenAI-style
model server (in process or as a script), ``vllm serve``, Trae agent's ``trae-cli`` and a
hosted model provider (``provider``: in front of a model server, with a key, misbehaviour
and its own prompt-cache rules)."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
APPTAINER = HERE / "apptainer.py"
OPENAI_UPSTREAM = HERE / "openai_upstream.py"
PROVIDER = HERE / "provider.py"
TRAE_CLI = HERE / "trae_cli.py"
VLLM = HERE / "vllm.py"
