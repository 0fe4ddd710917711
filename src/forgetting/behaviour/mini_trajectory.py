"""mini-swe-agent trajectories (``*.traj.json``), 2.x tool calling and 1.x / text mode.

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
  (:data:`forgetting.messages.MINI_1X_ACTIONS`) for ``trajectory_format: mini-swe-agent-1``,
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
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from forgetting.behaviour.events import ToolCallEvent, Trajectory
from forgetting.chat_format import content_text
from forgetting.errors import RunOutputError
from forgetting.messages import MINI_1X_ACTIONS, ActionSyntax, actions, detect_style, segment

_OUTPUT = re.compile(r"<output>\n?(.*)</output>", re.DOTALL)
_HEAD = re.compile(r"<output_head>\n?(.*?)</output_head>", re.DOTALL)
_TAIL = re.compile(r"<output_tail>\n?(.*?)</output_tail>", re.DOTALL)


def _extra(message: Mapping[str, Any]) -> Mapping[str, Any]:
    extra = message.get("extra")
    return extra if isinstance(extra, Mapping) else {}


def observation_payload(message: Mapping[str, Any]) -> str:
    """The command output inside a mini-swe-agent observation (see the module docstring)."""
    content = content_text(message)
    raw = _extra(message).get("raw_output")
    raw = raw if isinstance(raw, str) else None
    stripped = content.strip()
    if stripped.startswith("{"):
        try:
            obj = json.loads(stripped)
        except ValueError:
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


def _check_messages(messages: Any, source: Path) -> list[Mapping[str, Any]]:
    if not isinstance(messages, list) or not all(isinstance(m, Mapping) and "role" in m for m in messages):
        raise RunOutputError(
            f"{source}: 'messages' is not a list of chat messages; not a mini-swe-agent trajectory"
        )
    return messages


#: ``trajectory_format`` of the mini-swe-agent versions: 1.x, and 2.x
FORMAT_1X, FORMAT_2X = "mini-swe-agent-1", "mini-swe-agent-1.1"


def _installed_text_default() -> ActionSyntax:
    """The installed mini-swe-agent 2.x's text-mode action pattern (imports litellm: ~3 s)."""
    from forgetting.runner.mini import action_syntax

    syntax = action_syntax("mini-text")
    assert syntax is not None
    return syntax


def text_action_syntax(data: Any, source: Path) -> ActionSyntax:
    """The action pattern of a text-mode mini-swe-agent trajectory (see the module docstring)."""
    info = data.get("info") if isinstance(data, Mapping) else None
    config = info.get("config") if isinstance(info, Mapping) else None
    fmt = data.get("trajectory_format") if isinstance(data, Mapping) else None
    if isinstance(config, Mapping):
        for section in ("model", "agent"):
            sub = config.get(section)
            regex = sub.get("action_regex") if isinstance(sub, Mapping) else None
            if regex is None:
                continue
            try:
                return ActionSyntax(str(regex), f"{source}: info.config.{section}.action_regex")
            except ValueError as exc:
                raise RunOutputError(str(exc)) from None
    if fmt == FORMAT_2X:
        return _installed_text_default()
    if fmt == FORMAT_1X:
        return MINI_1X_ACTIONS
    raise RunOutputError(
        f"{source}: a text-mode trajectory that records neither its action_regex (info.config) nor its "
        f"trajectory_format ({FORMAT_1X} or {FORMAT_2X}); cannot tell its actions from its reasoning"
    )


def _text_commands(message: Mapping[str, Any], syntax: Callable[[], ActionSyntax]) -> list[str]:
    stored = _extra(message).get("actions")
    if isinstance(stored, list):
        return [a["command"] for a in stored if isinstance(a, Mapping) and isinstance(a.get("command"), str)]
    blocks = [a.command for a in actions(message, syntax()) if a.command is not None]
    return blocks if len(blocks) == 1 else []


def _is_format_error(message: Mapping[str, Any]) -> bool:
    return _extra(message).get("interrupt_type") == "FormatError"


def _turn_events(
    turn: int,
    assistant: Mapping[str, Any],
    obs: Sequence[Mapping[str, Any]],
    syntax: Callable[[], ActionSyntax] | None,
) -> list[ToolCallEvent]:
    """``syntax``: None for tool calling, else the text actions' pattern (asked for only when
    a reply does not store its actions)."""
    events: list[ToolCallEvent] = []
    if syntax is None:  # tool calling
        calls = actions(assistant, None)
        tool_msgs = [m for m in obs if m.get("role") == "tool"]
        if not calls or (obs and not tool_msgs):
            return []  # a format error: nothing was executed
        by_id = {m.get("tool_call_id"): m for m in tool_msgs if m.get("tool_call_id")}
        for j, call in enumerate(calls):
            m = by_id.get(call.call_id) if call.call_id else None
            if m is None and not by_id and j < len(tool_msgs):
                m = tool_msgs[j]  # ids not stored: answered in order
            output = content_text(m) if m is not None else ""
            payload = observation_payload(m) if m is not None else ""
            events.append(ToolCallEvent(turn, j, call.tool, dict(call.arguments), output, payload))
        return events
    if obs and _is_format_error(obs[0]):
        return []
    for j, command in enumerate(_text_commands(assistant, syntax)):
        m = obs[j] if j < len(obs) else None
        output = content_text(m) if m is not None else ""
        payload = observation_payload(m) if m is not None else ""
        events.append(ToolCallEvent(turn, j, "bash", {"command": command}, output, payload))
    return events


def load_mini(data: Any, source: Path) -> Trajectory:
    """A mini-swe-agent trajectory: the ``{info, messages}`` object, or a bare message list."""
    info: Mapping[str, Any] = {}
    if isinstance(data, Mapping):
        messages = _check_messages(data.get("messages"), source)
        info = data.get("info") if isinstance(data.get("info"), Mapping) else {}
    else:
        messages = _check_messages(data, source)
    style = detect_style(messages)
    seg = segment(messages, style)
    syntax = None if style == "tool_calls" else functools.cache(lambda: text_action_syntax(data, source))
    events: list[ToolCallEvent] = []
    for turn in seg.turns:
        obs = [messages[i] for i in turn.observations]
        events += _turn_events(turn.index, messages[turn.assistant], obs, syntax)
    exit_status = str(info.get("exit_status") or "")
    if not exit_status:
        exits = [m for m in messages if m.get("role") == "exit"]
        exit_status = str(_extra(exits[-1]).get("exit_status") or "") if exits else ""
    stats = info.get("model_stats") if isinstance(info.get("model_stats"), Mapping) else {}
    api_calls = stats.get("api_calls")
    turns = int(api_calls) if isinstance(api_calls, int) and api_calls >= len(seg.turns) else len(seg.turns)
    agent_cfg = (info.get("config") or {}).get("agent") if isinstance(info.get("config"), Mapping) else None
    step_limit = agent_cfg.get("step_limit") if isinstance(agent_cfg, Mapping) else None
    turn_cap = int(step_limit) if isinstance(step_limit, int) and step_limit > 0 else None
    fmt = "mini-toolcall" if style == "tool_calls" else "mini-text"
    agent = "mini" if style == "tool_calls" else "mini-text"
    return Trajectory(source, fmt, agent, tuple(events), turns, exit_status, turn_cap)
