"""Test support for the scripted model: the fixture task, a scratch git checkout of it, a
small in-process driver that talks to the model the way mini-swe-agent 2.4.6 does (its real
SWE-bench templates, observations rendered with its observation template, commands run for
real in the checkout) and one that runs it under Trae agent's loop (``drive_trae``), and
deletion functions that rewrite a history the way the deletion proxy does (placeholders,
token removal), for tests that need no HTTP and no litellm."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from jinja2 import StrictUndefined, Template

from forgetting.agents import action_syntax
from forgetting.cost.trajectory import MINI_BASH_TOOL
from forgetting.demo.scripted import ScriptedModel, ScriptedSettings, TaskBook
from forgetting.prompt import messages as msgs
from forgetting.prompt import tokenizer
from forgetting_testkit.checkout import ROOT
from forgetting_testkit.fakes.trae_cli import TraeLoop

TASKS = ROOT / "tests" / "data" / "scripted_tasks"
TASK_ID = "demo__shopcart-1"
CALM = ScriptedSettings.from_mapping({
    "detour_rate": 0.0, "wrong_first_rate": 0.0, "skip_tests_rate": 0.0, "stubborn_rate": 0.0,
    "fragment_error_rate": 0.0,
})
BASH_TOOL = MINI_BASH_TOOL  # the tool mini-swe-agent 2.x sends with every request
TOOL_PLACEHOLDER = "[tool output deleted]"
REASONING_PLACEHOLDER = "[reasoning deleted]"


def mini_config(style: str) -> dict[str, Any]:
    """mini-swe-agent's own SWE-bench config: tool calling or text actions (backticks)."""
    spec = importlib.util.find_spec("minisweagent")  # located, not imported (its import has side effects)
    assert spec is not None and spec.submodule_search_locations
    name = "swebench.yaml" if style == "tool_calls" else "swebench_backticks.yaml"
    path = Path(spec.submodule_search_locations[0]) / "config" / "benchmarks" / name
    return yaml.safe_load(path.read_text())


def problem_statement(task_id: str = TASK_ID, tasks: Path = TASKS) -> str:
    return json.loads((tasks / task_id / "instance.json").read_text())["problem_statement"]


def book() -> TaskBook:
    return TaskBook.load(TASKS)


def model(settings: ScriptedSettings = CALM) -> ScriptedModel:
    return ScriptedModel(book(), settings)


def git(repo: Path, *args: str) -> str:
    env = dict(
        os.environ,
        GIT_AUTHOR_NAME="demo",
        GIT_AUTHOR_EMAIL="demo@example.org",
        GIT_COMMITTER_NAME="demo",
        GIT_COMMITTER_EMAIL="demo@example.org",
        GIT_AUTHOR_DATE="2026-01-01T00:00:00Z",
        GIT_COMMITTER_DATE="2026-01-01T00:00:00Z",
    )
    return subprocess.run(
        ["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True
    ).stdout


def checkout(dest: Path, task_id: str = TASK_ID) -> Path:
    """A git repository of the fixture task's buggy base version at ``dest``."""
    shutil.copytree(TASKS / task_id / "repo", dest)
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "base")
    return dest


def run_tests(repo: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
    )


def shell_env() -> dict[str, str]:
    """The commands' environment: this interpreter's python/python3 first on PATH."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.update(PAGER="cat", MANPAGER="cat", PYTHONDONTWRITEBYTECODE="1")
    return env


def execute(repo: Path, command: str) -> dict[str, Any]:
    p = subprocess.run(
        ["bash", "-c", command],
        cwd=repo,
        env=shell_env(),
        capture_output=False,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
    )
    return {"output": p.stdout, "returncode": p.returncode, "exception_info": ""}


# ---------------------------------------------------------------------------- deletion
Deleter = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]


def _eligible(messages: Sequence[Mapping[str, Any]], keep_last: int) -> list[msgs.Turn]:
    turns = list(msgs.segment(messages).turns)
    return turns[: max(0, len(turns) - keep_last)]


def delete_tool_output(keep_last: int = 0, placeholder: str = TOOL_PLACEHOLDER) -> Deleter:
    """Turn-level 100 %: every eligible turn's tool output becomes a placeholder."""

    def apply(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = [dict(m) for m in messages]
        for turn in _eligible(messages, keep_last):
            for i in turn.observations:
                out[i]["content"] = placeholder
        return out

    return apply


def delete_tokens(share: float, keep_last: int = 0, seed: int = 0) -> Deleter:
    """Token-level: each eligible tool output loses ``share`` of its tokens (keyed by turn)."""

    def apply(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = [dict(m) for m in messages]
        for turn in _eligible(messages, keep_last):
            for k, i in enumerate(turn.observations):
                ids = tokenizer.encode(str(messages[i]["content"]))
                rng = random.Random(f"{seed}/{turn.index}/{k}")
                drop = set(rng.sample(range(len(ids)), round(share * len(ids))))
                out[i]["content"] = tokenizer.decode([t for j, t in enumerate(ids) if j not in drop])
        return out

    return apply


def delete_reasoning(keep_last: int = 0, placeholder: str = REASONING_PLACEHOLDER) -> Deleter:
    """Turn-level 100 % reasoning: the text outside the action becomes a placeholder."""

    def apply(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = [dict(m) for m in messages]
        for turn in _eligible(messages, keep_last):
            m = out[turn.assistant]
            if m.get("tool_calls"):
                m["content"] = placeholder
            else:
                spans = msgs.split_text_actions(str(m.get("content") or ""), TEXT_ACTIONS)
                m["content"] = placeholder + "\n\n" + "".join(t for kind, t in spans if kind == "action")
        return out

    return apply


def chain(*deleters: Deleter) -> Deleter:
    def apply(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for d in deleters:
            messages = d(messages)
        return messages

    return apply


# ---------------------------------------------------------------------------- the driver
#: mini-swe-agent's own text-mode action pattern (its model config's action_regex)
TEXT_ACTIONS: msgs.ActionSyntax = action_syntax("mini-text")  # type: ignore[assignment]


@dataclass
class Run:
    messages: list[dict[str, Any]] = field(default_factory=list)
    responses: list[dict[str, Any]] = field(default_factory=list)
    sent: list[list[dict[str, Any]]] = field(default_factory=list)
    submission: str | None = None
    exit: str = ""

    @property
    def steps(self) -> list[str]:
        return [r["scripted_stand_in"]["policy_step"] for r in self.responses]

    @property
    def commands(self) -> list[str]:
        out = []
        for m in self.messages:
            if m.get("role") == "assistant":
                out += [a.command or "" for a in msgs.actions(m, TEXT_ACTIONS)]
        return out


def start_messages(style: str, task_id: str = TASK_ID, tasks: Path = TASKS) -> list[dict[str, Any]]:
    cfg = mini_config(style)["agent"]
    variables = {"task": problem_statement(task_id, tasks)}
    return [
        {
            "role": "system",
            "content": Template(cfg["system_template"], undefined=StrictUndefined).render(**variables),
        },
        {
            "role": "user",
            "content": Template(cfg["instance_template"], undefined=StrictUndefined).render(**variables),
        },
    ]


def drive(
    the_model: ScriptedModel,
    repo: Path | None,
    *,
    style: str = "tool_calls",
    delete: Deleter | None = None,
    max_calls: int = 60,
    seed_header: str | None = None,
    stop_before: Callable[[dict[str, Any]], bool] | None = None,
    task_id: str = TASK_ID,
    tasks: Path = TASKS,
) -> Run:
    """Run the model against ``repo`` like mini-swe-agent would, until it submits, the call
    limit, or ``stop_before(response)`` holds (that response is then not executed)."""
    template = Template(mini_config(style)["model"]["observation_template"], undefined=StrictUndefined)
    run = Run(messages=start_messages(style, task_id, tasks))
    tools = [BASH_TOOL] if style == "tool_calls" else None
    for _ in range(max_calls):
        sent = delete(run.messages) if delete else list(run.messages)
        request: dict[str, Any] = {"model": "scripted", "messages": sent}
        if tools:
            request["tools"] = tools
        response = the_model.complete(request, seed_header)
        if stop_before is not None and stop_before(response):
            run.sent.append(sent)
            run.responses.append(response)
            run.exit = "stopped"
            return run
        run.sent.append(sent)
        run.responses.append(response)
        message = response["choices"][0]["message"]
        run.messages.append(message)
        if tools:
            calls = [
                (c["id"], json.loads(c["function"]["arguments"])["command"]) for c in message["tool_calls"]
            ]
        else:
            found = TEXT_ACTIONS.commands(message["content"])
            assert len(found) == 1, message["content"]
            calls = [(None, found[0])]
        assert repo is not None
        for call_id, command in calls:
            output = execute(repo, command)
            lines = output["output"].lstrip().splitlines(keepends=True)
            if (
                lines
                and lines[0].strip() == "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
                and output["returncode"] == 0
            ):
                run.submission = "".join(lines[1:])
                run.exit = "Submitted"
                return run
            obs = {"content": template.render(output=output)}
            obs.update({"role": "tool", "tool_call_id": call_id} if call_id else {"role": "user"})
            run.messages.append(obs)
    run.exit = "LimitsExceeded"
    return run


# ---------------------------------------------------------------------------- Trae's loop
@dataclass
class TraeRun:
    """A run of the scripted model under Trae's loop (the ``trae-cli`` test double's)."""

    trajectory: dict[str, Any]
    messages: list[dict[str, Any]]
    responses: list[dict[str, Any]] = field(default_factory=list)
    sent: list[list[dict[str, Any]]] = field(default_factory=list)

    @property
    def steps(self) -> list[str]:
        return [r["scripted_stand_in"]["policy_step"] for r in self.responses]

    @property
    def calls(self) -> list[tuple[str, dict[str, Any]]]:
        """Every tool call, in order: (tool, arguments)."""
        return [(c["name"], c["arguments"]) for it in self.trajectory["llm_interactions"]
                for c in it["response"]["tool_calls"] or []]


def drive_trae(
    the_model: ScriptedModel,
    repo: Path,
    *,
    delete: Deleter | None = None,
    max_steps: int = 60,
    must_patch: bool = True,
    seed_header: str | None = None,
    task_id: str = TASK_ID,
    tasks: Path = TASKS,
) -> TraeRun:
    """Run the model against ``repo`` as Trae agent would (``fakes/trae_cli.TraeLoop``: its
    tools, its ``[Project root path]`` task message, ``task_done`` under ``--must-patch``),
    each request rewritten by ``delete`` as the deletion proxy would."""
    run = TraeRun({}, [])

    def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        sent = delete(messages) if delete else list(messages)
        response = the_model.complete({"model": "scripted", "messages": sent, "tools": tools}, seed_header)
        run.sent.append(sent)
        run.responses.append(response)
        return response

    loop = TraeLoop(repo.resolve(), problem_statement(task_id, tasks), model, max_steps, must_patch, env=shell_env())
    run.trajectory = loop.run("scripted")
    run.messages = loop.messages
    return run
