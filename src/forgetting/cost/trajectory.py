"""Prompts rebuilt from a mini-swe-agent trajectory (``*.traj.json``), both formats.

* 2.x (``trajectory_format: mini-swe-agent-1.1``): messages as the model returned them
  (``assistant`` with ``tool_calls``, ``tool`` observations) plus an ``extra`` field per
  message (``extra.response``: the raw response with its usage; ``extra.timestamp``).
  Requests carried one ``bash`` tool (:data:`MINI_BASH_TOOL`), so tool-calling
  trajectories are rendered with it. Text mode (``litellm_textbased``) has no tools.
* 1.x (``mini-swe-agent-1``): hand-formatted ``{role, content}`` messages, text actions in
  a fenced block, observations as ``user`` messages, ``extra.response`` on assistant
  messages.

The prompt of model call *i* is every message before the *i*-th assistant message, with
the ``exit`` records mini-swe-agent appends at the end left out. A 2.x format error is a
model call too: its response was rejected, so no assistant message holds it; the ``user``
message reporting the error carries it in ``extra.response``, and that call's prompt is
every message before that message. The messages are rendered with
:mod:`forgetting.chat_format` once each (a prompt's blocks are a prefix of the whole
history's blocks, because a block depends only on its message and its neighbours' roles,
and a prompt always ends before an assistant message).

A trajectory holds the agent's own view of its history: with a deletion proxy in between,
the prompts actually sent are in the proxy's call log, not here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from forgetting import chat_format, layout
from forgetting.cost.prompts import (
    BlockStore,
    CallPrompt,
    RunPrompts,
    completion_tokens,
    reported_cached_tokens,
    run_id_from_path,
)
from forgetting.errors import RunOutputError
from forgetting.messages import detect_style, prompt_messages

#: trajectory formats this reader knows: 1.x writes ``mini-swe-agent-1``, 2.x ``…-1.1``
KNOWN_FORMATS = ("mini-swe-agent-1", "mini-swe-agent-1.1")

#: the one tool mini-swe-agent 2.x sends with every tool-calling request (its ``bash`` tool)
MINI_BASH_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Execute a bash command",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "The bash command to execute"}},
            "required": ["command"],
        },
    },
}


def read_trajectory(path: str | os.PathLike[str]) -> dict[str, Any]:
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise RunOutputError(f"{p}: cannot read trajectory ({exc})") from None
    except ValueError:
        raise RunOutputError(f"{p}: not valid JSON; not a mini-swe-agent trajectory") from None
    if isinstance(data, list):
        data = {"messages": data}
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise RunOutputError(f"{p}: no 'messages' list; not a mini-swe-agent trajectory")
    fmt = data.get("trajectory_format")
    if fmt is not None and fmt not in KNOWN_FORMATS:
        raise RunOutputError(f"{p}: unknown trajectory_format {fmt!r}; known: {', '.join(KNOWN_FORMATS)}")
    for i, m in enumerate(data["messages"]):
        if not isinstance(m, Mapping) or not isinstance(m.get("role"), str):
            raise RunOutputError(f"{p}: messages[{i}] is not a message with a role")
    return data


def _response(message: Mapping[str, Any]) -> Mapping[str, Any] | None:
    extra = message.get("extra")
    if isinstance(extra, Mapping) and isinstance(extra.get("response"), Mapping):
        return extra["response"]
    return None


def _is_call(message: Mapping[str, Any]) -> bool:
    if message.get("role") == "assistant":
        return True
    extra = message.get("extra")
    return isinstance(extra, Mapping) and "response" in extra


def _choice(response: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if response is None:
        return {}
    choices = response.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        return choices[0]
    return {}


def _output_tokens(message: Mapping[str, Any], response: Mapping[str, Any] | None) -> int:
    reported = completion_tokens(response.get("usage") if response else None)
    if reported is not None:
        return reported
    if message.get("role") == "assistant":
        generated: Mapping[str, Any] = message
    else:  # a rejected response: the message it came in, if the trajectory kept it
        generated = _choice(response).get("message") or {}
        if not generated:
            return 0
    return len(chat_format.completion_token_ids({"role": "assistant", **generated}))


def from_trajectory(path: str | os.PathLike[str], run_id: str | None = None) -> RunPrompts:
    """The prompts of a mini-swe-agent trajectory, rendered and tokenized once per message."""
    p = Path(path)
    data = read_trajectory(p)
    messages = prompt_messages(data["messages"])
    tools = [MINI_BASH_TOOL] if detect_style(messages) == "tool_calls" else None
    segments = chat_format.prompt_segments(messages, tools)
    store = BlockStore()
    # block of message j; the implicit system block (tools without a system message) first
    implicit = [store.intern(s.ids) for s in segments if s.message_index is None]
    by_message = [store.intern(s.ids) for s in segments if s.message_index is not None]
    gen = store.intern(chat_format.generation_prompt_ids())
    if run_id is None and p.name == layout.TRAJECTORY:  # inside a run directory
        run_id = run_id_from_path(p.resolve().parent)
    name = p.name.removesuffix(".json").removesuffix(".traj")
    rid = run_id or str((data.get("info") or {}).get("instance_id") or name)
    run = RunPrompts(rid, p, "trajectory", store)
    for j, m in enumerate(messages):
        if not _is_call(m):
            continue
        response = _response(m)
        extra = m.get("extra") if isinstance(m.get("extra"), Mapping) else {}
        stamp = extra.get("timestamp")
        run.calls.append(
            CallPrompt(
                call=len(run.calls) + 1,
                blocks=(*implicit, *by_message[:j], gen),
                n_messages=j,
                output_tokens=_output_tokens(m, response),
                reported_cached=reported_cached_tokens(response.get("usage") if response else None),
                time=float(stamp) if isinstance(stamp, int | float) and not isinstance(stamp, bool) else None,
                finish_reason=_choice(response).get("finish_reason"),
            )
        )
    return run
