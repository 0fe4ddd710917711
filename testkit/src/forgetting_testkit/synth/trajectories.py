"""The agent's own trajectory file of a synthetic run, in the format its real agent writes.

* mini-swe-agent 2.x: ``{info, messages, trajectory_format: "mini-swe-agent-1.1"}`` with the
  full, unreduced history and a final ``exit`` message carrying the exit status;
* Trae agent: ``TrajectoryRecorder``'s JSON — ``llm_interactions`` (per call, the messages new
  to it and the response with its tool calls) and ``agent_steps`` (each step's tool results).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from forgetting.prompt.messages import ActionSyntax


def iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")


def mini_trajectory(
    messages: Sequence[dict[str, Any]],
    *,
    exit_status: str,
    submission: str,
    api_calls: int,
    step_limit: int,
    model_name: str,
    actions: ActionSyntax | None = None,
) -> dict[str, Any]:
    """``actions``: the text-mode action pattern, recorded as mini-swe-agent 2.x records it
    (``info.config.model.action_regex``)."""
    history = [*messages, {"role": "exit", "content": submission,
                           "extra": {"exit_status": exit_status, "submission": submission}}]
    model: dict[str, Any] = {"model_name": f"hosted_vllm/{model_name}"}
    if actions is not None:
        model["action_regex"] = actions.regex
    return {
        "info": {
            "exit_status": exit_status,
            "submission": submission,
            "model_stats": {"instance_cost": 0.0, "api_calls": api_calls},
            "config": {"agent": {"step_limit": step_limit}, "model": model},
            "mini_version": "synthetic",
        },
        "messages": list(history),
        "trajectory_format": "mini-swe-agent-1.1",
    }


@dataclass
class TraeCall:
    """One model call of a Trae run, as its trajectory records it."""

    time: float
    content: str
    tool: str
    arguments: dict[str, Any]
    call_id: str
    result: str | None  # None: not executed (task_done, or the run ended)
    input_tokens: int
    output_tokens: int


def trae_trajectory(
    preamble: Sequence[dict[str, Any]],
    calls: Sequence[TraeCall],
    *,
    task: str,
    model_name: str,
    max_steps: int,
    success: bool,
    final_result: str,
    start: float,
    end: float,
    tool_names: Sequence[str],
) -> dict[str, Any]:
    interactions: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = [{"role": m["role"], "content": m["content"]} for m in preamble]
    for i, c in enumerate(calls, start=1):
        tool_call = {"call_id": c.call_id, "name": c.tool, "arguments": c.arguments, "id": None}
        interactions.append({
            "timestamp": iso(c.time),
            "provider": "openrouter",
            "model": model_name,
            "input_messages": pending,
            "response": {
                "content": c.content,
                "model": model_name,
                "finish_reason": "tool_calls",
                "usage": {"input_tokens": c.input_tokens, "output_tokens": c.output_tokens,
                          "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "reasoning_tokens": 0},
                "tool_calls": [tool_call],
            },
            "tools_available": list(tool_names),
        })
        results = []
        if c.result is not None:
            results.append({"call_id": c.call_id, "success": True, "result": c.result, "error": None, "id": None})
        steps.append({
            "step_number": i,
            "timestamp": iso(c.time),
            "state": "completed",
            "llm_messages": [],
            "llm_response": None,
            "tool_calls": [tool_call],
            "tool_results": results or None,
            "reflection": None,
            "error": None,
        })
        pending = [{"role": "user", "content": None, "tool_result": r} for r in results]
    return {
        "task": task,
        "start_time": iso(start),
        "end_time": iso(end),
        "provider": "openrouter",
        "model": model_name,
        "max_steps": max_steps,
        "llm_interactions": interactions,
        "agent_steps": steps,
        "success": success,
        "final_result": final_result,
        "execution_time": round(end - start, 3),
    }
