"""mini-swe-agent runs: the real package, with its own SWE-bench configs and prompts.

``mini`` uses ``swebench.yaml`` (tool calling, one ``bash`` tool; the study's agent) and
``mini-text`` ``swebench_backticks.yaml`` (a fenced ``mswea_bash_command`` block per reply,
observations as ``user`` messages; what counts as that block is the model config's
``action_regex``, which :func:`forgetting.agents.action_syntax` hands to the deletion proxy). The agent is
mini's ``DefaultAgent`` with
``LitellmModel`` / ``LitellmTextbasedModel`` pointed at the run's proxy; only what the study
fixes is changed: the step limit (``agent.turn_cap``), no cost limit, the wall-time limit
(``execution.run_timeout_s``), the command timeout, the model, temperature and output cap.

Environment: the demo's local checkout (``LocalEnvironment``, the shell gets this
interpreter's directory first on ``PATH`` and ``PYTHONDONTWRITEBYTECODE=1``: demo tasks are
Python projects and a stale ``.pyc`` once hid an edit; none of this pipeline's
``PYTHONPATH``, pytest options or pytest plugins), or on the cluster the task's
instance image through mini's Singularity/Apptainer environment (``cwd /testbed``).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from forgetting.agents import load_config, own_model_section
from forgetting.foundation.atomic import write_text
from forgetting.foundation.layout import PATCH, TRAJECTORY
from forgetting.run.context import RunContext
from forgetting.run.outcome import SUBMITTED, AgentOutcome, InfraFailure, classify_mini
from forgetting.study.runner import RunnerSettings

#: what litellm imports lazily on its first completion (≈0.2 s in every run process otherwise);
#: best effort: a module another litellm version lacks is skipped
_LITELLM_LAZY = (
    "litellm.litellm_core_utils.prompt_templates.file_id_utils",
    "litellm.llms.hosted_vllm.chat.transformation",
    "litellm.llms.litellm_proxy.chat.transformation",
    "litellm.integrations.generic_api.generic_api_callback",
    "litellm.proxy._types",
    "httpcore",
    "h11",
    "h2.connection",
)


def preload() -> None:
    """Import mini-swe-agent and litellm once (≈3.5 s), before the runs are forked; and what
    litellm would load on its first call. Starts no thread (the runs are forked after it)."""
    import litellm
    import minisweagent.agents.default
    import minisweagent.environments.local
    import minisweagent.environments.singularity
    import minisweagent.models.litellm_model
    import minisweagent.models.litellm_textbased_model  # noqa: F401

    litellm.suppress_debug_info = True
    with contextlib.suppress(Exception):  # a litellm without it: nothing to warm
        _ = litellm.encoding  # tiktoken's default encoding, loaded on first use
    for name in _LITELLM_LAZY:
        try:
            importlib.import_module(name)
        except Exception:  # best effort
            continue


def model_name(settings: RunnerSettings) -> str:
    """litellm's name for the served model behind an OpenAI-compatible server."""
    return f"hosted_vllm/{settings.served_name}"


def model_config(config: dict[str, Any], settings: RunnerSettings, api_base: str) -> dict[str, Any]:
    """mini's model section with the study's model, reached through the proxy."""
    section = own_model_section(config)
    section["model_name"] = model_name(settings)
    section["model_kwargs"] = {
        **(section.get("model_kwargs") or {}),
        "api_base": api_base,
        "api_key": "not-needed",
        "temperature": float(settings.model["temperature"]),
        "max_tokens": int(settings.model["max_tokens"]),
    }
    section["cost_tracking"] = "ignore_errors"
    return section


#: where the pytest plugin of ``agent.fixed_test_durations`` lives (alone: no pipeline code)
PYTEST_PLUGIN_DIR = Path(__file__).resolve().parents[1] / "demo" / "pytest_plugins"


def shell_env(config: dict[str, Any], *, local: bool, fixed_test_durations: bool = False) -> dict[str, str]:
    """The environment variables of the agent's commands (mini's own, plus ours locally)."""
    env = {str(k): str(v) for k, v in ((config.get("environment") or {}).get("env") or {}).items()}
    if local:
        env.pop("BASH_ENV", None)  # the image's conda activation; meaningless on this machine
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["PYTHONPATH"] = ""  # the task's own code only, not this pipeline's
        env["PYTEST_ADDOPTS"] = ""
        # pytest as a project environment has it: not the plugins of this pipeline's venv,
        # whose loading costs ~0.8 s of CPU per pytest run (demo tasks need plain pytest)
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        if fixed_test_durations:  # the demo: pytest's closing line without wall-clock seconds
            env["PYTHONPATH"] = str(PYTEST_PLUGIN_DIR)
            env["PYTEST_ADDOPTS"] = "-p forgetting_fixed_duration"
    return env


def agent_config(config: dict[str, Any], settings: RunnerSettings, trajectory: Path) -> dict[str, Any]:
    return {
        **(config.get("agent") or {}),
        "step_limit": settings.turn_cap,
        "cost_limit": 0,
        "wall_time_limit_seconds": settings.run_timeout_s,
        "output_path": trajectory,
    }


def mini_exec_args(settings: RunnerSettings, scratch: Path) -> list[str]:
    """``apptainer exec`` options of mini-swe-agent's steps. mini starts a fresh ``apptainer
    exec --writable SANDBOX bash -c …`` per step, and under ``--contain`` each exec gets a fresh
    /tmp of its session (Apptainer's container_linux.go, addTmpMount), so a file the agent left in
    /tmp would be gone at the next step. With ``--workdir DIR`` /tmp and /var/tmp are
    ``DIR/tmp`` and ``DIR/var_tmp`` instead, kept for the whole run (on scratch). The writable
    layer is mini's sandbox (on scratch), so a ``--writable-tmpfs`` the options name is left out.
    ``--no-home``: under ``--contain`` Apptainer mounts a fresh, empty home (``DIR/home``) over
    ``--fakeroot``'s home, ``/root``, hiding the image's ``/root/.bashrc`` that mini's SWE-bench
    config names in ``BASH_ENV`` (container_linux.go: getHomePaths, addHomeStagingDir)."""
    work = scratch / "apptainer-work"
    work.mkdir(parents=True, exist_ok=True)
    kept = [a for a in settings.apptainer_exec_args if a not in ("--writable-tmpfs", "--no-home")]
    return [*kept, "--no-home", "--workdir", str(work)]


def _environment(ctx: RunContext, config: dict[str, Any]) -> Any:
    settings, ws = ctx.settings, ctx.workspace
    env = shell_env(config, local=ws.local, fixed_test_durations=settings.fixed_test_durations)
    if ws.local:
        from minisweagent.environments.local import LocalEnvironment

        return LocalEnvironment(cwd=ws.cwd, env=env, timeout=settings.command_timeout_s)
    from minisweagent.environments.singularity import SingularityEnvironment

    tempfile.tempdir = str(ctx.scratch)  # mini builds its writable sandbox of the image here
    # mini's apptainer commands inherit this (forked) run's environment: the cache and temp dirs
    os.environ.update({k: v for k, v in settings.apptainer_settings.environ({}).items()})
    try:
        return SingularityEnvironment(
            image=str(ws.image), cwd=ws.cwd, env=env, timeout=settings.command_timeout_s,
            executable=settings.apptainer, exec_args=mini_exec_args(settings, ctx.scratch),
        )
    except Exception as exc:  # the sandbox could not be built: the workspace is missing
        raise InfraFailure(f"workspace: apptainer sandbox of {ws.image} failed: {exc}") from None


def run_mini(ctx: RunContext) -> AgentOutcome:
    """Run mini-swe-agent on the task; write trajectory.json and patch.diff into ``ctx.out``."""
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.models.litellm_model import LitellmModel
    from minisweagent.models.litellm_textbased_model import LitellmTextbasedModel

    agent_name = ctx.run.agent
    config = load_config(agent_name, ctx.settings.mini_config_files.get(agent_name))
    model_cls = LitellmModel if agent_name == "mini" else LitellmTextbasedModel
    model = model_cls(**model_config(config, ctx.settings, ctx.model_url))
    env = _environment(ctx, config)
    trajectory = ctx.out / TRAJECTORY
    agent = DefaultAgent(model, env, **agent_config(config, ctx.settings, trajectory))
    exception: BaseException | None = None
    try:
        agent.run(task=ctx.task_text)
    except Exception as exc:  # mini recorded it as the exit message and saved the trajectory
        exception = exc
    finally:
        cleanup = getattr(env, "cleanup", None)
        if cleanup is not None:
            cleanup()
    last = agent.messages[-1] if agent.messages else {}
    extra = (last.get("extra") or {}) if last.get("role") == "exit" else {}
    exit_status = str(extra.get("exit_status") or "")
    status, error = classify_mini(exit_status, exception)
    submission = str(extra.get("submission") or "") if status == SUBMITTED else ""
    agent.save(trajectory)
    write_text(ctx.out / PATCH, submission)
    return AgentOutcome(
        status=status,
        exit_status=exit_status or (type(exception).__name__ if exception else ""),
        error=error,
        extra={"agent_calls": agent.n_calls},
    )
