#!/usr/bin/env python3
"""Test double for Trae agent's ``trae-cli`` (Trae needs Python ≥ 3.12 and its container,
neither of which is here). It stands in for the *agent*, so the runner's Trae path can be
tested up to and through the launch: it accepts ``trae-cli run``'s options, reads the Trae
config file the runner wrote (model provider ``openrouter`` with a ``base_url``; like Trae, the
``OPENROUTER_BASE_URL``/``OPENROUTER_API_KEY`` environment variables win over the file),
makes ``FAKE_TRAE_CALLS`` (default 2) Chat Completions calls there with Trae's four tools,
runs the ``bash`` commands the model asks for in the working directory, edits a file,
and writes the patch (``git diff``) and a trajectory in Trae's format (``llm_interactions``
with only the messages new to each call, ``agent_steps``, ``success``).

Environment: FAKE_TRAE_ARGV (write argv and the parsed config to this JSON file),
FAKE_TRAE_FAIL=connection (the last step fails as Trae records an unreachable model).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import urllib.request
from datetime import datetime
from pathlib import Path

import yaml

TOOLS = [
    {"type": "function", "function": {"name": name, "description": name,
                                       "parameters": {"type": "object", "properties": {}}}}
    for name in ("bash", "str_replace_based_edit_tool", "sequentialthinking", "task_done")
]


def now() -> str:
    return datetime.now().isoformat()


def chat(base_url: str, api_key: str, model: dict, messages: list[dict]) -> dict:
    body = json.dumps({
        "model": model["model"], "messages": messages, "tools": TOOLS, "temperature": model["temperature"],
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
    base_url = os.environ.get("OPENROUTER_BASE_URL") or provider["base_url"]
    api_key = os.environ.get("OPENROUTER_API_KEY") or provider["api_key"]
    task = Path(args.file).read_text()
    work = Path(args.working_dir)
    traj = {"task": task, "start_time": now(), "end_time": "", "provider": "openrouter", "model": model["model"],
            "max_steps": agent["max_steps"], "llm_interactions": [], "agent_steps": [], "success": False,
            "final_result": None, "execution_time": 0.0}
    new_messages = [
        {"role": "system", "content": "You are an expert AI software engineering agent."},
        {"role": "user", "content": f"[Project root path]:\n{work}\n\n[Problem statement]: {task}"},
    ]
    history: list[dict] = []
    calls = int(os.environ.get("FAKE_TRAE_CALLS", "2"))
    for step in range(1, calls + 1):
        history += new_messages
        record_in = [{"role": m["role"], "content": m.get("content")} for m in new_messages]
        error = None
        try:
            if os.environ.get("FAKE_TRAE_FAIL") == "connection" and step == calls:
                raise ConnectionError("Connection error.")
            reply = chat(base_url, api_key, model, history)
        except Exception as exc:
            error = str(exc)
            traj["agent_steps"].append({"step_number": step, "state": "error", "error": error})
            break
        message = reply["choices"][0]["message"]
        history.append({k: v for k, v in message.items() if k in ("role", "content", "tool_calls")})
        tool_calls = [
            {"call_id": c["id"], "name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"]),
             "id": None}
            for c in message.get("tool_calls") or []
        ]
        traj["llm_interactions"].append({
            "timestamp": now(), "provider": "openrouter", "model": model["model"], "input_messages": record_in,
            "response": {"content": message.get("content") or "", "model": reply.get("model"),
                         "finish_reason": reply["choices"][0].get("finish_reason"), "usage": {},
                         "tool_calls": tool_calls or None},
            "tools_available": [t["function"]["name"] for t in TOOLS],
        })
        results, new_messages = [], []
        for call in tool_calls:
            command = str(call["arguments"].get("command", "true"))
            if "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in command:
                command = "true"
            done = subprocess.run(["bash", "-c", command], cwd=work, capture_output=True, text=True, timeout=60)
            result = {"call_id": call["call_id"], "success": done.returncode == 0, "result": done.stdout,
                      "error": done.stderr, "id": None}
            results.append(result)
            new_messages.append({"role": "tool", "tool_call_id": call["call_id"],
                                 "content": (done.stdout + done.stderr).strip() or "(no output)"})
        traj["agent_steps"].append({"step_number": step, "state": "completed", "tool_calls": tool_calls or None,
                                    "tool_results": results or None, "error": None})
    else:
        target = next((p for p in sorted(work.rglob("*.py")) if ".git" not in p.parts), None)
        if target is not None:
            target.write_text(target.read_text() + "\n# edited by the stand-in trae-cli\n")
        traj["success"] = True
        traj["final_result"] = "done"
    traj["end_time"] = now()
    Path(args.trajectory_file).write_text(json.dumps(traj, indent=2))
    diff = subprocess.run(["git", "--no-pager", "diff"], cwd=work, capture_output=True, text=True).stdout
    Path(args.patch_path).write_text(diff)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
