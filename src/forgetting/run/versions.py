"""Versions a run records: the agent's, the model's and the pipeline's."""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Mapping
from typing import Any

from forgetting import __version__
from forgetting.agents import TRAE_COMMIT
from forgetting.run.model_server import served_name_of
from forgetting.study.config import PROJECT_ROOT
from forgetting.study.runner import RunnerSettings

#: how results of the scripted backend are labelled wherever they appear
SCRIPTED_NOTE = "scripted stand-in for the LLM"


@functools.cache
def git_commit() -> str | None:
    """The pipeline checkout's commit (with ``+dirty`` for local changes), or None."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=10, check=False
        )
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=10, check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def agent_version(agent: str, settings: RunnerSettings) -> dict[str, Any]:
    if agent == "trae":
        image = settings.trae.apptainer_image or settings.trae.install_dir
        return {"name": "trae-agent", "commit": TRAE_COMMIT, "install": str(image) if image else None}
    import minisweagent

    style = "tool calling" if agent == "mini" else "text actions"
    return {"name": "mini-swe-agent", "version": minisweagent.__version__, "style": style}


def model_version(model: Mapping[str, Any], served: Any = None) -> dict[str, Any]:
    """The model's entry of ``versions``: name, served name, backend, what the served model
    adds (``served.describe()``: an endpoint's URL and owner), and the stand-in's note when
    the runs come from the scripted model (``served.model_backend``, else the backend)."""
    backend = str(model["backend"])
    out: dict[str, Any] = {
        "name": model["name"],
        "served_name": served_name_of(model),
        "backend": backend,
    }
    if served is not None:
        out.update(served.describe())
    label = served.model_backend if served is not None else backend
    if label == "scripted":
        out["note"] = SCRIPTED_NOTE
    return out


def pipeline_version() -> dict[str, Any]:
    return {"forgetting": __version__, "git_commit": git_commit()}
