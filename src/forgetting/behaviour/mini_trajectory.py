"""mini-swe-agent trajectories (``*.traj.json``), 2.x tool calling and 1.x / text mode.

* **tool calling** (2.x default): ``assistant`` messages with ``tool_calls``; each executed
  call is answered by a ``role: tool`` message with its ``tool_call_id``. A turn whose
  observations hold no ``tool`` message but a ``user`` message was a format error: its
  calls were not executed and are not tool calls. A turn with no observation at all (the
  submit command, which ends the run) keeps its calls, with an empty output.
* **text** (1.x, 2.x text mode): one fenced ```` ```bash ```` / ```` ```mswea_bash_command ````
  block in the assistant text; the observation is the next ``user`` message. A reply with
  no block or with several was a format error and executed nothing (the agent's rule); when
  ``extra.actions`` is stored it is used instead of re-parsing the text.

The observation's *payload* — the command's own output — is taken from the observation
template (``<output>…</output>`` of the text templates, the ``"output"`` field of
``mini.yaml``'s JSON template). When the message stores ``extra.raw_output`` and the
template shows the output in full, the raw output is used as is. When the template elided
the middle of a long output, the payload is the head and tail the agent saw.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from forgetting.behaviour.events import ToolCallEvent, Trajectory
from forgetting.chat_format import content_text
from forgetting.errors import RunOutputError
from forgetting.messages import actions, detect_style, segment

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


def _text_commands(message: Mapping[str, Any]) -> list[str]:
    stored = _extra(message).get("actions")
    if isinstance(stored, list):
        return [a["command"] for a in stored if isinstance(a, Mapping) and isinstance(a.get("command"), str)]
    blocks = [a.command for a in actions(message) if a.command is not None]
    return blocks if len(blocks) == 1 else []


def _is_format_error(message: Mapping[str, Any]) -> bool:
    return _extra(message).get("interrupt_type") == "FormatError"


def _turn_events(
    turn: int, assistant: Mapping[str, Any], obs: Sequence[Mapping[str, Any]], style: str
) -> list[ToolCallEvent]:
    events: list[ToolCallEvent] = []
    if style == "tool_calls":
        calls = actions(assistant)
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
    for j, command in enumerate(_text_commands(assistant)):
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
    events: list[ToolCallEvent] = []
    for turn in seg.turns:
        obs = [messages[i] for i in turn.observations]
        events += _turn_events(turn.index, messages[turn.assistant], obs, style)
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
