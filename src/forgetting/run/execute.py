"""One run, in the process that carries it out: workspace, proxy, agent, outcome.

:func:`execute_run` is what a forked run process does. It writes the agent's files into the
run's temporary directory and reports how the run ended in ``.outcome.json`` there; the
batch (:mod:`forgetting.run.batch`) turns that into ``run.json`` and renames the
directory into place. Nothing here finalizes a run, so a run process killed at any point
leaves nothing that looks finished.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from forgetting.agents import action_syntax
from forgetting.foundation.atomic import write_json
from forgetting.foundation.errors import UserError
from forgetting.run.context import RunContext
from forgetting.run.mini import run_mini
from forgetting.run.model_server import die_with_parent
from forgetting.run.outcome import SUBMITTED, AgentOutcome, InfraFailure
from forgetting.run.proxy import start_proxy
from forgetting.run.proxy.upstream import Access
from forgetting.run.rundir import OUTCOME_FILE
from forgetting.run.trae import run_trae
from forgetting.run.workspace import make_workspace, problem_statement
from forgetting.study.plan import Run
from forgetting.study.proxy import ProxySettings
from forgetting.study.runner import RunnerSettings

AGENT_LOG = "agent.log"


def run_agent(ctx: RunContext) -> AgentOutcome:
    if ctx.run.agent == "trae":
        return run_trae(ctx)
    return run_mini(ctx)


def execute_run(run: Run, settings: RunnerSettings, *, out: Path, scratch: Path, model_url: str,
                proxy_settings: ProxySettings, access: Access | None = None,
                proxy_options: Mapping[str, Any] | None = None) -> AgentOutcome:
    """Carry out ``run`` with its own deletion proxy in front of ``model_url`` (``access``: the
    API key and shared limits of an endpoint, :mod:`forgetting.run.proxy.upstream`;
    ``proxy_options``: how the proxy counts prompts and what the server said of its cache,
    :func:`forgetting.run.proxy.start_proxy`'s ``counting`` and ``server_info``).

    Raises :class:`InfraFailure` when the workspace or the proxy cannot be made. A run whose
    last model call failed because of the model server — unreachable, the key refused, the
    model unknown, rate limited or failing past the proxy's retries, a reply that is no JSON
    — is an infrastructure failure naming the server, whatever the agent made of the error
    (an agent that stops on a 401 has not produced a result).
    """
    t0 = time.monotonic()
    task_text = problem_statement(settings, run.task)
    workspace = make_workspace(settings, run.task, run.run_id)
    print(f"workspace {workspace.cwd}{f' in {workspace.image}' if workspace.image else ''} "
          f"({time.monotonic() - t0:.2f} s)", flush=True)
    try:
        try:
            proxy = start_proxy(
                model_url, run.deletion, run.seed, out, run.run_id,
                actions=action_syntax(run.agent, settings.mini_config_files.get(run.agent)), settings=proxy_settings,
                access=access, **(proxy_options or {}),
            )
        except (UserError, OSError) as exc:
            raise InfraFailure(f"proxy: could not start: {exc}") from None
        print(f"proxy {proxy.url} -> {model_url} ({run.deletion.name}) ({time.monotonic() - t0:.2f} s)", flush=True)
        try:
            ctx = RunContext(run, settings, out, scratch, workspace, task_text, proxy.url)
            outcome = run_agent(ctx)
        finally:
            proxy.stop()
        outcome.turns = proxy.calls
        failure = proxy.server.upstream.failure
        if failure is not None and outcome.status != SUBMITTED:
            print(f"the agent stopped ({outcome.status}: {outcome.error}) after the model server failed", flush=True)
            raise InfraFailure(failure)
        print(f"agent finished ({time.monotonic() - t0:.2f} s)", flush=True)
        return outcome
    finally:
        workspace.remove()


def _setup_process(out: Path) -> None:
    """A run process of its own: own process group, dies with the batch, logs to agent.log."""
    os.setpgid(0, 0)
    die_with_parent()
    fd = os.open(out / AGENT_LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    # the streams themselves too: a caller may have replaced them (pytest's capture does)
    sys.stdout = open(1, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    for noisy in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "httpx"):  # one line per call otherwise
        logging.getLogger(noisy).setLevel(logging.WARNING)


def hide_key(access: Access | None) -> None:
    """Remove the API key's variable from this run process's environment: the proxy holds the
    key, and the agent — and every command it runs — must not see it (``env`` in a shell
    would write it into the trajectory)."""
    if access is not None and access.key_name:
        os.environ.pop(access.key_name, None)


def child_main(run: Run, settings: RunnerSettings, *, out: Path, scratch: Path, model_url: str,
               proxy_settings: ProxySettings, access: Access | None = None,
               proxy_options: Mapping[str, Any] | None = None) -> int:
    """The body of a forked run process; returns its exit status (never raises)."""
    try:
        hide_key(access)
        out.mkdir(parents=True, exist_ok=False)
        scratch.mkdir(parents=True, exist_ok=True)
        _setup_process(out)
        print(f"run {run.run_id} (seed {run.seed}) pid {os.getpid()}", flush=True)
        try:
            outcome = execute_run(
                run, settings, out=out, scratch=scratch, model_url=model_url, proxy_settings=proxy_settings,
                access=access, proxy_options=proxy_options,
            )
        except InfraFailure as exc:
            outcome = AgentOutcome(status="infra", error=str(exc))
        except Exception as exc:  # a fault of the pipeline, not of the agent: do not record it
            traceback.print_exc()
            outcome = AgentOutcome(status="infra", error=f"runner failed: {type(exc).__name__}: {exc}"[:500])
        print(f"outcome: {outcome.status} {outcome.exit_status} turns={outcome.turns} {outcome.error or ''}",
              flush=True)
        write_json(out / OUTCOME_FILE, outcome.as_dict())
        return 0
    except BaseException:
        traceback.print_exc()
        return 70
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        sys.stdout.flush()
        sys.stderr.flush()
