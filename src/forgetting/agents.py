"""Facts of the agents the study runs, stated once, and what the study reads from their own
configuration.

mini-swe-agent's own benchmark configs and its submission marker; Trae agent's pinned commit
and the prefix its self-contained install lives under inside a container. The runner, the
scripted stand-in model and the synthetic study read them from here. :func:`action_syntax` —
what counts as an action in an agent's reply text, from the agent's own configuration — is
read by the runner (for the deletion proxy), the proxy command and the behaviour analysis.
mini-swe-agent itself (an optional dependency, ~3 s to import with litellm) is imported only
where its own configuration classes are read.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from forgetting.foundation.errors import ConfigError
from forgetting.foundation.inputs import read_yaml
from forgetting.prompt.messages import ActionSyntax

#: mini-swe-agent's own benchmark configs: tool calling (the study's) and text actions
MINI_CONFIGS: dict[str, str] = {"mini": "swebench.yaml", "mini-text": "swebench_backticks.yaml"}
MINI_AGENTS: tuple[str, ...] = tuple(MINI_CONFIGS)
#: the first output line that ends a mini-swe-agent run as submitted (its environments check
#: it; what follows is the submission). Its SWE-bench configs submit with
#: ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cat patch.txt``.
MINI_SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
#: Trae agent's commit the study pins (containers/trae-agent.def builds it)
TRAE_COMMIT = "e839e559ac61bdd0e057c375dd1dee391fee797d"
#: where the Trae agent's self-contained install lives inside the instance container
TRAE_PREFIX = "/opt/trae-agent"
#: Trae agent's default tools (its ``TraeAgentConfig.tools`` at that commit; the runner names
#: them in the config so a change of defaults cannot change the study)
TRAE_TOOLS: tuple[str, ...] = ("bash", "str_replace_based_edit_tool", "sequentialthinking", "task_done")
#: Trae's file viewer and editor (``view``, ``create``, ``str_replace``, ``insert``; absolute paths)
TRAE_EDIT_TOOL = "str_replace_based_edit_tool"
#: the tool call that ends a Trae run: never executed; Trae accepts it as the run's end
#: (``success``) unless ``--must-patch`` finds an empty ``git diff``, when it answers
#: :data:`TRAE_EMPTY_PATCH` and the run goes on
TRAE_FINISH_TOOL = "task_done"
TRAE_EMPTY_PATCH = "ERROR! Your Patch is empty. Please provide a patch that fixes the problem."
#: how Trae's user message names the project root, which its edit tool needs absolute paths under
TRAE_ROOT_HEADER = "[Project root path]:"

#: environment of the process, set before litellm or minisweagent is imported
OFFLINE_ENV = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # else litellm fetches its cost map at import
    "MSWEA_SILENT_STARTUP": "1",
    "MSWEA_CONFIGURED": "true",
    "MSWEA_COST_TRACKING": "ignore_errors",
    # the proxy already retries a failing model server; mini's own retries wait 4-60 s each
    "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": "3",
}


def prepare_environment(config_dir: Path) -> None:
    """Offline, quiet, and no user config: call before importing minisweagent."""
    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)
    if not os.environ.get("MSWEA_GLOBAL_CONFIG_DIR"):
        config_dir.mkdir(parents=True, exist_ok=True)
        os.environ["MSWEA_GLOBAL_CONFIG_DIR"] = str(config_dir)


def config_path(agent: str, config_file: Path | None = None) -> Path:
    """The mini-swe-agent config ``agent`` runs with: ``config_file`` (``agent.<agent>.config_file``),
    or without one mini-swe-agent's own (:data:`~forgetting.agents.MINI_CONFIGS`)."""
    if config_file is not None:
        return config_file
    from minisweagent.config import builtin_config_dir

    return Path(builtin_config_dir) / "benchmarks" / MINI_CONFIGS[agent]


def load_config(agent: str, config_file: Path | None = None) -> dict[str, Any]:
    """The mini-swe-agent config file ``agent`` runs with, parsed (a bad file is one line)."""
    path = config_path(agent, config_file)
    data = read_yaml(path, what=f"agent.{agent}.config_file", error=ConfigError)
    if not isinstance(data, dict):
        raise ConfigError(f"agent.{agent}.config_file: {path}: a mini-swe-agent config must be a mapping")
    if not isinstance(data.get("model") or {}, dict):
        raise ConfigError(f"agent.{agent}.config_file: {path}: model must be a mapping")
    return data


def own_model_section(config: dict[str, Any]) -> dict[str, Any]:
    """The config file's model section without the model it names (the runner sets ours)."""
    return {k: v for k, v in (config.get("model") or {}).items() if k not in ("model_name", "model_class")}


def action_syntax(agent: str, config_file: Path | None = None) -> ActionSyntax | None:
    """What counts as an action in ``agent``'s reply text (the deletion engine never deletes
    it), from the agent's own configuration: ``mini`` and ``trae`` act by tool calls only
    (None); ``mini-text`` by the ``action_regex`` of the model the runner builds —
    ``LitellmTextbasedModelConfig`` from the model section of the config file it runs with
    (``config_file``: ``RunnerSettings.mini_config_files``; None: mini-swe-agent's own): that
    file's ``model.action_regex``, else the class's default."""
    if agent in ("mini", "trae"):
        return None
    if agent not in MINI_CONFIGS:
        raise ValueError(f"not an agent of the study: {agent!r}")
    if "minisweagent" not in sys.modules:  # a process that is no run (the proxy command, synth)
        prepare_environment(Path(tempfile.gettempdir()) / "forgetting-mswea-config")
    import minisweagent
    from minisweagent.models.litellm_textbased_model import LitellmTextbasedModelConfig
    from pydantic import ValidationError

    config = load_config(agent, config_file)
    where = str(config_file) if config_file is not None else f"mini-swe-agent's {MINI_CONFIGS[agent]}"
    try:
        regex = LitellmTextbasedModelConfig(**own_model_section(config), model_name="hosted_vllm/any").action_regex
    except ValidationError as exc:
        raise ConfigError(f"agent.{agent}.config_file: {where}: its model section is not valid: {exc}") from None
    if "action_regex" in (config.get("model") or {}):
        source = f"{where}: model.action_regex"
    else:
        source = f"mini-swe-agent {minisweagent.__version__} LitellmTextbasedModelConfig.action_regex (default)"
    try:
        return ActionSyntax(regex, source)
    except ValueError as exc:
        raise ConfigError(f"agent.{agent}.config_file: {exc}") from None
