"""Trae agent runs: ``trae-cli run …`` configured to reach the model through the run's proxy.

Trae agent (bytedance/trae-agent, pinned at :data:`~forgetting.agents.TRAE_COMMIT`)
needs Python ≥ 3.12 and is not on PyPI, so it lives in its own image
(``containers/trae-agent.def``) as a self-contained prefix, ``/opt/trae-agent``. On the
cluster a run starts it *inside the task's SWE-bench instance image*, with that prefix bound
in, so its bash tool works in ``/testbed`` with the task's environment (docs/runs.md)::

    apptainer exec --contain --cleanenv --fakeroot --overlay LAYER/overlay.img --workdir LAYER/work \\
        --no-home --pwd /testbed \\
        --bind RUN_TMP:/forgetting-run --bind TRAE.sif:/opt/trae-agent:id=N,image-src=/opt/trae-agent \\
        --env BASH_ENV=/root/.bashrc INSTANCE.sif /opt/trae-agent/bin/trae-cli run \\
        --file /forgetting-run/task.txt --working-dir /testbed \\
        --config-file /forgetting-run/trae_config.yaml --must-patch \\
        --patch-path /forgetting-run/patch.diff --trajectory-file /forgetting-run/trajectory.json \\
        --console-type simple

The prefix is an *image bind* of the Trae image's root file system partition, named by its
descriptor ID (``id=N``, :func:`prefix_bind`). Without ``id=``, Apptainer mounts the image's
first *data* partition, and an image made by ``apptainer build`` has none (only its root file
system, a primary system partition), so the exec would stop with "no data partition found"
(Apptainer's internal/pkg/runtime/engine/apptainer/container_linux.go, addImageBindMount: with
``id`` > 0 the partition of that ID among all of them, else the first of
``GetDataPartitions``; pkg/image/sif.go files the primary system partition under root-file-system
use only). The ID depends on what the build stored before the partition (the definition file,
its JSON objects: Apptainer's own e2e test binds its test image with ``id=4``,
e2e/actions/actions.go "SifWithID"), so it is read from the image's descriptors, not assumed.

For demo tasks (local checkouts, tests) ``agent.trae.executable`` is started directly with
the checkout as working directory. The model provider is Trae's ``openrouter`` provider,
whose Chat Completions client takes any ``base_url``: here the run's proxy. Trae reads
``OPENROUTER_BASE_URL`` / ``OPENROUTER_API_KEY`` from the environment *before* its config
file, so they are removed from the agent's environment.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from forgetting.agents import TRAE_PREFIX, TRAE_TOOLS
from forgetting.evaluate.layer import writable_layer
from forgetting.foundation.atomic import write_text
from forgetting.foundation.errors import ConfigError, ResourceError, RunOutputError
from forgetting.foundation.layout import PATCH, TRAJECTORY
from forgetting.foundation.sif import read_sif
from forgetting.records.trae import TraeTrajectory, parse_trae
from forgetting.run.context import RunContext
from forgetting.run.mini import shell_env
from forgetting.run.outcome import (
    CAPPED,
    CONTEXT_EXCEEDED,
    ERROR,
    SUBMITTED,
    AgentOutcome,
    InfraFailure,
    is_context_overflow,
)
from forgetting.study.runner import RunnerSettings

TASK_FILE = "task.txt"
CONFIG_FILE = "trae_config.yaml"
#: where the run's temporary directory appears inside the instance container
MOUNT = "/forgetting-run"
#: the name of the model provider entry in Trae's config
PROVIDER = "forgetting_proxy"
#: Trae's tools (its defaults, named so a change of defaults cannot change the study)
TOOLS = TRAE_TOOLS
#: environment variables Trae prefers over its config file
_PROVIDER_ENV = ("OPENROUTER_BASE_URL", "OPENROUTER_API_KEY")
_EXCEEDED = "exceeded maximum steps"
#: how a failed model call reads in Trae's step errors (openai's exception messages)
_UNAVAILABLE = ("connection error", "request timed out", "error code: 500", "error code: 502",
                "error code: 503", "error code: 504", "error code: 429")


def trae_config(settings: RunnerSettings, base_url: str) -> dict[str, Any]:
    """Trae's config file: its agent with the study's step cap, the model behind the proxy."""
    return {
        "agents": {
            "trae_agent": {
                "enable_lakeview": False,  # Lakeview summarises steps with extra model calls
                "model": "study_model",
                "max_steps": settings.turn_cap,
                "tools": list(TOOLS),
            }
        },
        "model_providers": {PROVIDER: {"provider": "openrouter", "base_url": base_url, "api_key": "not-needed"}},
        "models": {
            "study_model": {
                "model_provider": PROVIDER,
                "model": settings.served_name,
                "max_tokens": int(settings.model["max_tokens"]),
                "temperature": float(settings.model["temperature"]),
                "top_p": 1,
                "top_k": 0,
                "max_retries": settings.trae.max_retries,
                # Trae runs a reply's tool calls concurrently when true, and its bash tool is one
                # shell session: two bash calls in one reply then garble each other's output and
                # leave the session hung (docs/runs.md). The model is not told either way.
                "parallel_tool_calls": False,
            }
        },
        "allow_mcp_servers": [],
        "mcp_servers": {},
    }


def check_ready(settings: RunnerSettings) -> None:
    """Fail before any run when Trae cannot be started (one line naming the key)."""
    if settings.dataset_kind == "demo":
        return
    t = settings.trae
    if t.apptainer_image is None and t.install_dir is None:
        raise ConfigError("agent.trae: give apptainer_image (containers/trae-agent.def) or install_dir")
    where = t.apptainer_image or t.install_dir
    if not Path(str(where)).exists():
        raise ConfigError(f"agent.trae: {where} not found; build the image first (docs/cluster.md)")
    prefix_bind(settings)  # the image has the partition the bind names


def prefix_bind(settings: RunnerSettings) -> str:
    """The ``--bind`` of Trae's prefix: ``IMAGE:/opt/trae-agent:id=N,image-src=/opt/trae-agent``,
    N the descriptor ID of the image's root file system (module docstring), or a host directory
    read-only. An image without one (not made by ``apptainer build``) is one error line."""
    t = settings.trae
    if t.apptainer_image is not None:
        try:
            ident = read_sif(t.apptainer_image).partition_id
        except ResourceError as exc:
            raise ConfigError(f"agent.trae.apptainer_image: {exc}") from None
        if ident is None:
            raise ConfigError(
                f"agent.trae.apptainer_image: {t.apptainer_image} has no root file system partition to bind "
                "/opt/trae-agent from; build it with `apptainer build` from containers/trae-agent.def"
            )
        return f"{t.apptainer_image}:{TRAE_PREFIX}:id={ident},image-src={TRAE_PREFIX}"
    return f"{t.install_dir}:{TRAE_PREFIX}:ro"


def command(ctx: RunContext, layer: Sequence[str] = ("--writable-tmpfs",)) -> list[str]:
    """The exact command line that starts the agent for this run; ``layer``: the options of its
    writable layer (:func:`forgetting.evaluate.layer.writable_layer`)."""
    settings, ws = ctx.settings, ctx.workspace
    inside = MOUNT if not ws.local else str(ctx.out)
    cli = [
        settings.trae.executable, "run",
        "--file", f"{inside}/{TASK_FILE}",
        "--working-dir", ws.cwd,
        "--config-file", f"{inside}/{CONFIG_FILE}",
        "--must-patch",
        "--patch-path", f"{inside}/{PATCH}",
        "--trajectory-file", f"{inside}/{TRAJECTORY}",
        "--console-type", "simple",
    ]
    if ws.local:
        return cli
    return [*container_command(settings, Path(str(ws.image)), ctx.out, ws.cwd, layer), *cli]


def container_command(settings: RunnerSettings, image: Path, out: Path, cwd: str, layer: Sequence[str]) -> list[str]:
    """``apptainer exec`` of a Trae run up to the agent's program: its options, writable layer,
    binds (the run's directory, Trae's prefix) and environment, in the instance ``image`` —
    the same for the run and for the preflight's check of it."""
    return [
        settings.apptainer, "exec", *settings.apptainer_exec_args, *layer,
        # the image's own /root: under --contain Apptainer mounts a fresh, empty home over it
        # (--fakeroot's home is /root; container_linux.go: getHomePaths, addHomeStagingDir), which
        # would hide the .bashrc that BASH_ENV names
        "--no-home",
        "--pwd", cwd,
        "--bind", f"{out}:{MOUNT}",
        "--bind", prefix_bind(settings),
        "--env", "BASH_ENV=/root/.bashrc",  # the instance image's `conda activate testbed`
        str(image),
    ]


def agent_env(local: bool, fixed_test_durations: bool = False) -> dict[str, str]:
    """``trae-cli``'s environment, which its bash sessions inherit: locally (demo tasks) the
    same shell environment as mini-swe-agent's local runs (this interpreter's Python first,
    not this pipeline's ``PYTHONPATH``; ``agent.fixed_test_durations``' pytest plugin)."""
    env = {k: v for k, v in os.environ.items() if k not in _PROVIDER_ENV}
    if local:
        env.update(shell_env({}, local=True, fixed_test_durations=fixed_test_durations))
    return env


def _last_error(traj: TraeTrajectory) -> str:
    for step in reversed(traj.steps):
        if step.error:
            return step.error
    return ""


def classify(traj: TraeTrajectory | None, exit_code: int | None, timed_out: bool) -> tuple[str, str, str | None]:
    """(status, exit_status, error) from Trae's trajectory and its process's exit status."""
    if timed_out:
        return ERROR, "TimeExceeded", "TimeExceeded: the run reached execution.run_timeout_s"
    if traj is None:
        return ERROR, "NoTrajectory", f"trae-cli exited with status {exit_code} without a trajectory"
    if traj.success:
        return SUBMITTED, "Submitted", None
    final = traj.final_result
    if _EXCEEDED in final:
        return CAPPED, "LimitsExceeded", None
    error = _last_error(traj)
    if error and is_context_overflow(error):
        return CONTEXT_EXCEEDED, "ContextWindowExceeded", None
    if error and any(p in error.lower() for p in _UNAVAILABLE):
        return "infra", "ModelUnavailable", f"model unavailable: {error}"[:500]
    reason = error or final or f"trae-cli exited with status {exit_code}"
    return ERROR, "Error", reason[:500]


def run_trae(ctx: RunContext) -> AgentOutcome:
    """Start ``trae-cli`` for the run and wait for it; read back its trajectory and patch."""
    out = ctx.out
    write_text(out / TASK_FILE, ctx.task_text)
    write_text(out / CONFIG_FILE, yaml.safe_dump(trae_config(ctx.settings, ctx.model_url), sort_keys=False))
    with contextlib.ExitStack() as stack:
        layer: Sequence[str] = ()
        env = agent_env(ctx.workspace.local, ctx.settings.fixed_test_durations)
        if not ctx.workspace.local:
            apptainer = ctx.settings.apptainer_settings
            try:
                layer = stack.enter_context(writable_layer(apptainer, f"trae-{out.name}"))
            except ResourceError as exc:
                raise InfraFailure(f"writable layer: {exc}") from None
            env = apptainer.environ(env)
        exit_code, timed_out = _start_and_wait(command(ctx, layer), ctx, env)
    # apptainer's own failures (image not found, bind refused) exit 255 before the agent starts
    trajectory = out / TRAJECTORY
    try:
        traj = _read_trajectory(trajectory)
    except RunOutputError as exc:  # a trajectory Trae left in a form no stage could read
        traj, bad = None, str(exc)
    else:
        bad = None
    if traj is None and bad is None and exit_code == 255 and not ctx.workspace.local:
        raise InfraFailure(f"apptainer could not start the agent (exit 255); see {out.name}/agent.log")
    status, exit_status, error = classify(traj, exit_code, timed_out)
    if bad is not None and not timed_out:
        status, exit_status, error = ERROR, "BadTrajectory", bad[:500]
    if not (out / PATCH).exists():
        write_text(out / PATCH, "")
    return AgentOutcome(
        status=status,
        exit_status=exit_status,
        error=error,
        agent_exit_code=exit_code,
        extra={"agent_calls": len(traj.interactions) if traj is not None else 0},
    )


def _start_and_wait(cmd: list[str], ctx: RunContext, env: dict[str, str]) -> tuple[int, bool]:
    print(f"$ {' '.join(cmd)}", flush=True)
    sys.stdout.flush()
    try:
        process = subprocess.Popen(
            cmd,
            cwd=ctx.workspace.path if ctx.workspace.local else ctx.out,
            env=env,
            stdout=sys.stdout.fileno(),
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    except OSError as exc:
        raise InfraFailure(f"could not start {cmd[0]}: {exc.strerror or exc}") from None
    try:
        return process.wait(timeout=ctx.settings.run_timeout_s), False
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait(), True


def _read_trajectory(path: Path) -> TraeTrajectory | None:
    """Trae's trajectory, parsed as every later stage parses it (None when there is none)."""
    for _ in range(2):  # Trae rewrites the file after every step; the final write is complete
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (ValueError, UnicodeDecodeError):
            time.sleep(0.1)
            continue
        return parse_trae(data, path)
    return None
