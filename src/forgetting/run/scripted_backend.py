"""How a batch starts the scripted stand-in model: ``python -m forgetting scripted-model``
on loopback, the ``scripted`` backend of :data:`forgetting.run.model_server.BACKENDS`."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

from forgetting.run.model_server import package_env, served_name_of

#: seconds the scripted stand-in may take to answer its health check (it starts in about one)
STARTUP_TIMEOUT_S = 1800.0


def scripted_command(model: Mapping[str, Any], *, host: str, port: int, seed: int) -> list[str]:
    """The scripted stand-in model's server command line: the ``model.scripted`` settings (as
    JSON), the served name, and ``tasks`` (the demo tasks directory, which the batch adds)."""
    s = dict(model["scripted"])
    tasks = s.pop("tasks", None)
    cmd = [sys.executable, "-m", "forgetting", "scripted-model", "--host", host, "--port", str(port)]
    cmd += ["--seed", str(s.pop("seed", seed))]
    if s:
        cmd += ["--settings", json.dumps(s, sort_keys=True)]
    cmd += ["--served-name", served_name_of(model)]
    if tasks:
        cmd += ["--tasks", str(tasks)]
    return cmd


class ScriptedBackend:
    """The scripted stand-in as a model server: a ``python -m forgetting`` child of this very
    package (:func:`~forgetting.run.model_server.package_env`)."""

    def command(self, model: Mapping[str, Any], *, host: str, port: int, seed: int) -> list[str]:
        return scripted_command(model, host=host, port=port, seed=seed)

    def startup_timeout_s(self, model: Mapping[str, Any]) -> float:
        return STARTUP_TIMEOUT_S

    def env(self) -> dict[str, str]:
        return package_env()
