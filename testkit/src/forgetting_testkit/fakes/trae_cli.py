#!/usr/bin/env python3
"""Test double for Trae agent's ``trae-cli`` (the real one needs Python ≥ 3.12 and its own
install: tests/runner/test_trae_cli.py runs that one when ``FORGETTING_TRAE_CLI`` names it).
It stands in for the *agent*, so the runner's Trae path can be tested up to and through the
launch without it, and it follows Trae's loop at the pinned commit as the runner relies on it:

* it accepts ``trae-cli run``'s options and reads the config file the runner wrote (model
  provider ``openrouter`` with a ``base_url``; like Trae, ``OPENROUTER_BASE_URL`` /
  ``OPENROUTER_API_KEY`` in the environment win over the file);
* each step is one Chat Completions call with the whole history and Trae's four tools; the
  reply's tool calls run one after another (``parallel_tool_calls: false``): ``bash`` in the
  working directory, the editor's ``view`` and ``str_replace`` with Trae's output texts,
  ``sequentialthinking``; results go back as ``tool`` messages (the output, then standard
  error after ``Tool call failed with error:``);
* a ``task_done`` call is not executed: it ends the run as a success, unless ``--must-patch``
  finds an empty ``git diff``, when the next message says so and the run goes on; after
  ``max_steps`` steps the run ends "exceeded maximum steps";
* it writes the trajectory in Trae's format (``llm_interactions`` with only the messages new
  to each call, ``agent_steps``, ``success``, ``final_result``) and the patch (``git diff``).

Environment: FAKE_TRAE_ARGV (write argv and the parsed config to this JSON file),
FAKE_TRAE_FAIL=connection (the second step's model call fails as Trae records an unreachable
model). :class:`TraeLoop` is also the loop of the scripted model's Trae driver
(``forgetting_testkit.scripted.drive_trae``), with the model called in process.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

ROOT_HEADER = "[Project root path]:"
EMPTY_PATCH = "ERROR! Your Patch is empty. Please provide a patch that fixes the problem."
NO_CALLS = "It seems that you have not completed the task."
EXCEEDED = "Task execution exceeded maximum steps without completion."
SYSTEM = "You are an expert AI software engineering agent. Call task_done when the issue is solved."
VIEW_HEADER = "Here's the result of running `cat -n` on {}:\n"


def _tool(name: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": f"Trae's {name} tool (test double)",
        "parameters": {"type": "object", "properties": properties, "required": required}}}


TOOLS = [
    _tool("bash", {"command": {"type": "string"}, "restart": {"type": "boolean"}}, ["command"]),
    _tool("str_replace_based_edit_tool", {
        "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert"]},
        "path": {"type": "string"}, "file_text": {"type": "string"}, "insert_line": {"type": "integer"},
        "new_str": {"type": "string"}, "old_str": {"type": "string"},
        "view_range": {"type": "array", "items": {"type": "integer"}}}, ["command", "path"]),
    _tool("sequentialthinking", {"thought": {"type": "string"}}, ["thought"]),
    _tool("task_done", {}, []),
]


def now() -> str:
    return datetime.now().isoformat()


def numbered(text: str, first: int) -> str:
    return "\n".join(f"{first + k:6}\t{line}" for k, line in enumerate(text.split("\n")))


def editor(args: dict[str, Any]) -> tuple[str, str]:
    """(output, error) of the editor's ``view`` / ``str_replace``, in Trae's words."""
    path = Path(str(args.get("path", "")))
    if not path.is_absolute():
        return "", f"The path {path} is not an absolute path, it should start with `/`."
    if not path.exists():
        return "", f"The path {path} does not exist. Please provide a valid path."
    command = args.get("command")
    text = path.read_text()
    if command == "view":
        first, lines = 1, text.split("\n")
        if args.get("view_range"):
            a, b = args["view_range"]
            first, lines = a, lines[a - 1 : None if b == -1 else b]
        return VIEW_HEADER.format(path) + numbered("\n".join(lines), first) + "\n", ""
    if command == "str_replace":
        old, new = str(args.get("old_str")), str(args.get("new_str") or "")
        count = text.count(old)
        if count != 1:
            how = "did not appear verbatim in" if count == 0 else "occurs more than once in"
            return "", f"No replacement was performed, old_str `{old}` {how} {path}."
        path.write_text(text.replace(old, new))
        line = text.split(old)[0].count("\n")
        start = max(0, line - 4)
        snippet = "\n".join(path.read_text().split("\n")[start : line + 5 + new.count("\n")])
        return (f"The file {path} has been edited. " + VIEW_HEADER.format(f"a snippet of {path}")
                + numbered(snippet, start + 1) + "\n" + "Review the changes and make sure they are as expected."), ""
    return "", f"Unrecognized command {command} (test double: view and str_replace only)"


def run_tool(name: str, args: dict[str, Any], work: Path, env: dict[str, str] | None) -> tuple[str, str, bool]:
    """(output, error, success) of one tool call."""
    if name == "bash":
        done = subprocess.run(["bash", "-c", str(args.get("command", ""))], cwd=work, env=env,
                              capture_output=True, text=True, timeout=120)
        return done.stdout.removesuffix("\n"), done.stderr.removesuffix("\n"), done.returncode == 0
    if name == "str_replace_based_edit_tool":
        out, err = editor(args)
        return out, err, not err
    if name == "sequentialthinking":
        return "Thought recorded.", "", True
    return "", f"Tool '{name}' not found", False


def result_text(output: str, error: str) -> str:
    text = f"{output}\n" if output else ""
    if error:
        text += f"Tool call failed with error:\n{error}"
    return text.strip()


def git_diff(work: Path) -> str:
    return subprocess.run(["git", "--no-pager", "diff"], cwd=work, capture_output=True, text=True).stdout


Model = Callable[[list[dict[str, Any]], list[dict[str, Any]]], dict[str, Any]]


@dataclass
class TraeLoop:
    """Trae's agent loop over a working directory, with ``model(messages, tools)`` answering."""

    work: Path
    task: str
    model: Model
    max_steps: int
    must_patch: bool = True
    env: dict[str, str] | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    trajectory: dict[str, Any] = field(default_factory=dict)

    def run(self, model_name: str = "model", fail_at: int | None = None) -> dict[str, Any]:
        traj = {"task": self.task, "start_time": now(), "end_time": "", "provider": "openrouter",
                "model": model_name, "max_steps": self.max_steps, "llm_interactions": [], "agent_steps": [],
                "success": False, "final_result": None, "execution_time": 0.0}
        self.trajectory = traj
        new: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"{ROOT_HEADER}\n{self.work}\n\n[Problem statement]: {self.task}\n"},
        ]
        records = [dict(m) for m in new]  # as Trae records them: a tool result as its own object
        for step in range(1, self.max_steps + 1):
            self.messages += new
            record_in, records = records, []
            try:
                if fail_at == step:
                    raise ConnectionError("Connection error.")
                reply = self.model(self.messages, TOOLS)
            except Exception as exc:
                traj["agent_steps"].append({"step_number": step, "state": "error", "error": str(exc)})
                break
            message = reply["choices"][0]["message"]
            calls = [{"call_id": c["id"], "name": c["function"]["name"],
                      "arguments": json.loads(c["function"]["arguments"] or "{}"), "id": None}
                     for c in message.get("tool_calls") or []]
            self.messages.append({k: v for k, v in message.items() if k in ("role", "content", "tool_calls")})
            traj["llm_interactions"].append({
                "timestamp": now(), "provider": "openrouter", "model": model_name, "input_messages": record_in,
                "response": {"content": message.get("content") or "", "model": reply.get("model"),
                             "finish_reason": reply["choices"][0].get("finish_reason"), "usage": {},
                             "tool_calls": calls or None},
                "tools_available": [t["function"]["name"] for t in TOOLS],
            })
            agent_step: dict[str, Any] = {"step_number": step, "state": "completed", "tool_calls": calls or None,
                                          "tool_results": None, "error": None}
            traj["agent_steps"].append(agent_step)
            if any(c["name"] == "task_done" for c in calls):
                if self.must_patch and not git_diff(self.work).strip():
                    new = [{"role": "user", "content": EMPTY_PATCH}]
                    records = [dict(m) for m in new]
                    continue
                traj["success"], traj["final_result"] = True, message.get("content") or ""
                break
            if not calls:
                new = [{"role": "user", "content": NO_CALLS}]
                records = [dict(m) for m in new]
                continue
            results, new = [], []
            for call in calls:
                output, error, ok = run_tool(call["name"], call["arguments"], self.work, self.env)
                results.append({"call_id": call["call_id"], "success": ok, "result": output or None,
                                "error": error, "id": None})
                records.append({"role": "user", "content": None, "tool_result": results[-1]})
                new.append({"role": "tool", "tool_call_id": call["call_id"], "content": result_text(output, error)})
            agent_step["tool_results"] = results
        else:
            traj["final_result"] = EXCEEDED
        traj["end_time"] = now()
        return traj


def chat(base_url: str, api_key: str, model: dict, messages: list[dict], tools: list[dict]) -> dict:
    body = json.dumps({
        "model": model["model"], "messages": messages, "tools": tools, "temperature": model["temperature"],
        "top_p": model["top_p"], "n": 1, "max_tokens": model["max_tokens"],
    }).encode()
    req = urllib.request.Request(
        base_url.rstrip("/") + "/chat/completions", data=body,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {api_key}"},
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


def main() -> int:
    parser = argparse.ArgumentParser(prog="trae-cli")
    sub = parser.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run")
    run.add_argument("--file", required=True)
    run.add_argument("--working-dir", required=True)
    run.add_argument("--config-file", required=True)
    run.add_argument("--must-patch", action="store_true")
    run.add_argument("--patch-path", required=True)
    run.add_argument("--trajectory-file", required=True)
    run.add_argument("--console-type", default="simple")
    args = parser.parse_args()

    config = yaml.safe_load(Path(args.config_file).read_text())
    if os.environ.get("FAKE_TRAE_ARGV"):
        Path(os.environ["FAKE_TRAE_ARGV"]).write_text(json.dumps({"argv": sys.argv[1:], "config": config}))
    agent = config["agents"]["trae_agent"]
    model = config["models"][agent["model"]]
    provider = config["model_providers"][model["model_provider"]]
    assert provider["provider"] == "openrouter", provider
    assert model["parallel_tool_calls"] is False, "this test double runs a reply's tool calls one by one"
    base_url = os.environ.get("OPENROUTER_BASE_URL") or provider["base_url"]
    api_key = os.environ.get("OPENROUTER_API_KEY") or provider["api_key"]
    work = Path(args.working_dir)
    loop = TraeLoop(work, Path(args.file).read_text(), lambda m, t: chat(base_url, api_key, model, m, t),
                    int(agent["max_steps"]), must_patch=args.must_patch)
    traj = loop.run(model["model"], fail_at=2 if os.environ.get("FAKE_TRAE_FAIL") == "connection" else None)
    Path(args.trajectory_file).write_text(json.dumps(traj, indent=2))
    Path(args.patch_path).write_text(git_diff(work))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
