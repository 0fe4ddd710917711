"""Tool calls of a mini-swe-agent trajectory (parsed by :mod:`forgetting.records.mini`),
2.x tool calling and 1.x / text mode.

* **tool calling** (2.x default): ``assistant`` messages with ``tool_calls``; each executed
  call is answered by a ``role: tool`` message with its ``tool_call_id``. A turn whose
  observations hold no ``tool`` message but a ``user`` message was a format error: its
  calls were not executed and are not tool calls. A turn with no observation at all (the
  submit command, which ends the run) keeps its calls, with an empty output.
* **text** (1.x, 2.x text mode): one action block in the assistant text; the observation is
  the next ``user`` message. A reply with no block or with several was a format error and
  executed nothing (the agent's rule); when ``extra.actions`` is stored (2.x) it is used
  instead of re-parsing the text. What a block is, is the agent's own pattern
  (:func:`text_action_syntax`): the ``action_regex`` the trajectory records in its
  ``info.config`` (2.x: ``model.action_regex``; 1.x: ``agent.action_regex``), else the
  default of the version that wrote it — 1.x's ```` ```bash ```` block
  (:data:`forgetting.prompt.messages.MINI_1X_ACTIONS`) for ``trajectory_format: mini-swe-agent-1``,
  the installed 2.x's ``LitellmTextbasedModelConfig.action_regex`` for ``mini-swe-agent-1.1``.

The observation's *payload* — the command's own output — is taken from the observation
template (``<output>…</output>`` of the text templates, the ``"output"`` field of
``mini.yaml``'s JSON template). When the message stores ``extra.raw_output`` and the
template shows the output in full, the raw output is used as is. When the template elided
the middle of a long output, the payload is the head and tail the agent saw.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Sequence

from forgetting.agents import action_syntax
from forgetting.behaviour.events import ToolCallEvent, Trajectory
from forgetting.foundation.errors import RunOutputError
from forgetting.prompt.messages import MINI_1X_ACTIONS, ActionSyntax, actions, segment
from forgetting.records.mini import FORMAT_1X, FORMAT_2X, MiniMessage, MiniTrajectory

_OUTPUT = re.compile(r"<output>\n?(.*)</output>", re.DOTALL)
_HEAD = re.compile(r"<output_head>\n?(.*?)</output_head>", re.DOTALL)
_TAIL = re.compile(r"<output_tail>\n?(.*?)</output_tail>", re.DOTALL)


def observation_payload(message: MiniMessage) -> str:
    """The command output inside a mini-swe-agent observation (see the module docstring)."""
    content = message.text
    raw = message.raw_output
    stripped = content.strip()
    if stripped.startswith("{"):
        try:
            obj = json.loads(stripped)
        except (ValueError, RecursionError):
            obj = None
        if isinstance(obj, dict) and "returncode" in obj:
            if "output" in obj:
                return raw if raw is not None else str(obj["output"])
            if "output_head" in obj or "output_tail" in obj:
                return f"{obj.get('output_head', '')}\n{obj.get('output_tail', '')}"
    m = _OUTPUT.search(content)
    if m:
        return raw if raw is not None else m.group(1)
    head, tail = _HEAD.search(content), _TAIL.search(content)
    if head or tail:
        return f"{head.group(1) if head else ''}\n{tail.group(1) if tail else ''}"
    return raw if raw is not None else content


def _installed_text_default() -> ActionSyntax:
    """The installed mini-swe-agent 2.x's text-mode action pattern (imports litellm: ~3 s)."""
    syntax = action_syntax("mini-text")
    assert syntax is not None
    return syntax


def text_action_syntax(traj: MiniTrajectory) -> ActionSyntax:
    """The action pattern of a text-mode mini-swe-agent trajectory (see the module docstring)."""
    if traj.action_regex is not None:
        section, regex = traj.action_regex
        try:
            return ActionSyntax(regex, f"{traj.source}: info.config.{section}.action_regex")
        except ValueError as exc:
            raise RunOutputError(str(exc)) from None
    if traj.format == FORMAT_2X:
        return _installed_text_default()
    if traj.format == FORMAT_1X:
        return MINI_1X_ACTIONS
    raise RunOutputError(
        f"{traj.source}: a text-mode trajectory that records neither its action_regex (info.config) nor its "
        f"trajectory_format ({FORMAT_1X} or {FORMAT_2X}); cannot tell its actions from its reasoning"
    )


def _text_commands(message: MiniMessage, syntax: Callable[[], ActionSyntax]) -> list[str]:
    if message.stored_actions is not None:
        return list(message.stored_actions)
    blocks = [a.command for a in actions(message.message, syntax()) if a.command is not None]
    return blocks if len(blocks) == 1 else []


def _turn_events(
    turn: int,
    assistant: MiniMessage,
    obs: Sequence[MiniMessage],
    syntax: Callable[[], ActionSyntax] | None,
) -> list[ToolCallEvent]:
    """``syntax``: None for tool calling, else the text actions' pattern (asked for only when
    a reply does not store its actions)."""
    events: list[ToolCallEvent] = []
    if syntax is None:  # tool calling
        calls = assistant.tool_calls
        tool_msgs = [m for m in obs if m.role == "tool"]
        if not calls or (obs and not tool_msgs):
            return []  # a format error: nothing was executed
        by_id = {m.tool_call_id: m for m in tool_msgs if m.tool_call_id}
        for j, call in enumerate(calls):
            m = by_id.get(call.call_id) if call.call_id else None
            if m is None and not by_id and j < len(tool_msgs):
                m = tool_msgs[j]  # ids not stored: answered in order
            output = m.text if m is not None else ""
            payload = observation_payload(m) if m is not None else ""
            events.append(ToolCallEvent(turn, j, call.tool, dict(call.arguments), output, payload))
        return events
    if obs and obs[0].interrupt_type == "FormatError":
        return []
    for j, command in enumerate(_text_commands(assistant, syntax)):
        m = obs[j] if j < len(obs) else None
        output = m.text if m is not None else ""
        payload = observation_payload(m) if m is not None else ""
        events.append(ToolCallEvent(turn, j, "bash", {"command": command}, output, payload))
    return events


def mini_events(traj: MiniTrajectory) -> Trajectory:
    """The tool calls of a parsed mini-swe-agent trajectory, and how the run ended."""
    messages = traj.messages
    seg = segment(traj.chat_messages(), traj.style)
    syntax = None if traj.style == "tool_calls" else functools.cache(lambda: text_action_syntax(traj))
    events: list[ToolCallEvent] = []
    for turn in seg.turns:
        obs = [messages[i] for i in turn.observations]
        events += _turn_events(turn.index, messages[turn.assistant], obs, syntax)
    api_calls = traj.api_calls
    turns = api_calls if api_calls is not None and api_calls >= len(seg.turns) else len(seg.turns)
    step_limit = traj.step_limit
    turn_cap = step_limit if step_limit is not None and step_limit > 0 else None
    fmt = "mini-toolcall" if traj.style == "tool_calls" else "mini-text"
    agent = "mini" if traj.style == "tool_calls" else "mini-text"
    return Trajectory(traj.source, fmt, agent, tuple(events), turns, traj.exit_status, turn_cap)
