"""How a batch's proxies count their prompts (``model.tokenizer``): the served model's own
tokenizer and chat template where they are at hand (:mod:`forgetting.prompt.served_format`), the
scripted model's own format, or Qwen's approximation; resolved once per batch, before its
server starts, so that a missing tokenizer fails before any expensive work."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from forgetting.foundation.errors import ConfigError
from forgetting.prompt import served_format
from forgetting.prompt.served_format import Counting
from forgetting.run.model_server import expand
from forgetting.run.vllm_memory import find_model_dir


def model_dir_of(model: Mapping[str, Any], root: Path | None = None) -> Path | None:
    """The served model's directory, where one is at hand: ``model.tokenizer_dir``,
    ``model.vllm.model_dir``, ``model.name`` when it is a directory, else (``backend: vllm``)
    the Hugging Face cache's snapshot of ``model.name``. ``model``: a loaded study's
    (``study.model.section``)."""
    for value in (model.get("tokenizer_dir"), model["vllm"].get("model_dir"), model["name"]):
        if value:
            path = Path(expand(str(value)))
            if root is not None and not path.is_absolute():
                path = root / path
            if path.is_dir():
                return path
    if model["backend"] == "vllm":
        found, _ = find_model_dir(str(model["name"]))
        return found
    return None


def counting_for(model: Mapping[str, Any], root: Path | None = None) -> Counting:
    """How the runs' proxies count prompts, by ``model.tokenizer`` (config/README.md):
    the served model's own tokenizer and template where they are at hand, the scripted
    model's own format, or Qwen's approximation. A ``served`` model whose directory is
    missing is a :class:`ConfigError` before any server starts. ``model``: a loaded study's
    (``study.model.section``)."""
    choice, backend = model["tokenizer"], model["backend"]
    if choice == "qwen2.5":
        return Counting("approximation")
    if choice == "auto" and backend == "scripted":
        return Counting("served")  # the stand-in renders forgetting.prompt.chat_format with Qwen's BPE itself
    if choice == "auto" and backend == "endpoint" and not model.get("tokenizer_dir"):
        return Counting("approximation")
    found = model_dir_of(model, root)
    if found is None:
        raise ConfigError(f"model.tokenizer: {choice}: no directory of {model['name']} with its tokenizer.json here; "
                          "set model.tokenizer_dir (or model.vllm.model_dir), or model.tokenizer: qwen2.5 "
                          "(an approximation)")
    template = model.get("chat_template")
    if template and root is not None and not Path(expand(str(template))).is_absolute():
        template = str(root / expand(str(template)))
    return Counting("served", served_format.load(str(found), str(template) if template else None))


def counting_line(counting: Counting) -> str:
    """One line for the batch's log: how its prompts are counted."""
    if counting.served is not None:
        f = counting.served.files
        return f"the served model's tokenizer ({f.tokenizer_json}) and chat template ({f.template_source})"
    if counting.method == "served":
        return "the scripted model's own format (forgetting.prompt.chat_format, Qwen's BPE)"
    return "Qwen3-Coder's format with Qwen's BPE (an approximation: the server's tokenizer is not at hand)"
