"""Prompts rebuilt from a mini-swe-agent trajectory (``*.traj.json``, 1.x or 2.x; parsed by
:mod:`forgetting.records.mini`).

Tool-calling requests carried mini-swe-agent 2.x's one ``bash`` tool
(:data:`~forgetting.records.mini.MINI_BASH_TOOL`), so tool-calling trajectories are rendered
with it; text mode and 1.x have no tools.

The prompt of model call *i* is every message before the *i*-th assistant message, with
the ``exit`` records mini-swe-agent appends at the end left out. A 2.x format error is a
model call too: its response was rejected, so no assistant message holds it; the ``user``
message reporting the error carries it in ``extra.response``, and that call's prompt is
every message before that message. The messages are rendered with
:mod:`forgetting.prompt.chat_format` once each (a prompt's blocks are a prefix of the whole
history's blocks, because a block depends only on its message and its neighbours' roles,
and a prompt always ends before an assistant message).

A trajectory holds the agent's own view of its history: with a deletion proxy in between,
the prompts actually sent are in the proxy's call log, not here.
"""

from __future__ import annotations

import os
from pathlib import Path

from forgetting.cost.prompts import BlockStore, CallPrompt, RunPrompts
from forgetting.foundation import layout
from forgetting.foundation.errors import RunOutputError
from forgetting.prompt import chat_format
from forgetting.prompt.usage import NO_USAGE
from forgetting.records import MiniMessage, MiniTrajectory, read_trajectory, run_id_from_path
from forgetting.records.mini import MINI_BASH_TOOL

__all__ = ["MINI_BASH_TOOL", "from_trajectory", "read_mini"]


def read_mini(path: str | os.PathLike[str]) -> MiniTrajectory:
    """A mini-swe-agent trajectory (a Trae agent trajectory is priced from its call log)."""
    traj = read_trajectory(path)
    if not isinstance(traj, MiniTrajectory):
        raise RunOutputError(
            f"{path}: a Trae agent trajectory records no prompts; cost its run's call log ({layout.CALLS})"
        )
    return traj


def _output_tokens(message: MiniMessage) -> int:
    response = message.response
    reported = response.usage.completion_tokens if response else None
    if reported is not None:
        return reported
    if message.role == "assistant":
        generated = message.message
    else:  # a rejected response: the message it came in, if the trajectory kept it
        generated = (response.message if response else None) or {}
        if not generated:
            return 0
    return len(chat_format.completion_token_ids({"role": "assistant", **generated}))


def from_trajectory(path: str | os.PathLike[str], run_id: str | None = None) -> RunPrompts:
    """The prompts of a mini-swe-agent trajectory, rendered and tokenized once per message."""
    p = Path(path)
    traj = read_mini(p)
    prompt = traj.prompt_messages()
    tools = [MINI_BASH_TOOL] if traj.style == "tool_calls" else None
    segments = chat_format.prompt_segments([m.message for m in prompt], tools)
    store = BlockStore()
    # block of message j; the implicit system block (tools without a system message) first
    implicit = [store.intern(s.ids) for s in segments if s.message_index is None]
    by_message = [store.intern(s.ids) for s in segments if s.message_index is not None]
    gen = store.intern(chat_format.generation_prompt_ids())
    if run_id is None and p.name == layout.TRAJECTORY:  # inside a run directory
        parent = p.resolve().parent
        run_id = run_id_from_path(parent) or parent.name
    name = p.name.removesuffix(".json").removesuffix(".traj")
    rid = run_id or traj.instance_id or name
    run = RunPrompts(rid, p, "trajectory", store)
    for j, m in enumerate(prompt):
        if not m.is_call:
            continue
        response = m.response
        run.calls.append(
            CallPrompt(
                call=len(run.calls) + 1,
                blocks=(*implicit, *by_message[:j], gen),
                n_messages=j,
                output_tokens=_output_tokens(m),
                time=m.timestamp,
                finish_reason=response.finish_reason if response else None,
                usage=response.usage if response else NO_USAGE,
            )
        )
    return run
