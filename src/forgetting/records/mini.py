"""mini-swe-agent trajectories (``*.traj.json``): the one parse, for behaviour and cost alike.

The formats (``trajectory_format``):

* 2.x (``mini-swe-agent-1.1``): ``{info, messages, trajectory_format}``; messages as the model
  returned them plus an ``extra`` per message — ``extra.response`` (the raw response with its
  usage; a reply rejected as a format error has no assistant message, and the ``user``
  message reporting the error carries its response), ``extra.timestamp``, ``extra.actions``
  (the commands the agent parsed), ``extra.raw_output`` (an observation's command output),
  ``extra.interrupt_type`` (``FormatError``), and the final ``exit`` message's
  ``extra.exit_status``. Tool calling: ``assistant`` messages with ``tool_calls`` answered by
  ``tool`` messages; text mode: one action block in the assistant text, the observation a
  ``user`` message. Tool-calling requests carried one tool, :data:`MINI_BASH_TOOL`.
* 1.x (``mini-swe-agent-1``): hand-formatted ``{role, content}`` messages, text actions, the
  observations as ``user`` messages, ``extra.response`` on assistant messages.
* a bare list of messages (no ``info``).

:func:`parse_mini` checks every field a reader uses — each message's role, content, tool
calls, ``extra``; ``info``'s exit status, model stats and config — and yields a
:class:`MiniTrajectory`; a wrongly typed field is one error line naming the file and the
field (``messages[4].tool_calls is a string, expected a list or null``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forgetting.foundation.errors import RunOutputError
from forgetting.prompt.chat_format import content_text
from forgetting.prompt.messages import NON_PROMPT_ROLES, Action, Style, actions, detect_style
from forgetting.prompt.usage import Usage, parse_usage
from forgetting.records.fields import Fields

#: ``trajectory_format`` of the mini-swe-agent versions: 1.x, and 2.x
FORMAT_1X, FORMAT_2X = "mini-swe-agent-1", "mini-swe-agent-1.1"
KNOWN_FORMATS = (FORMAT_1X, FORMAT_2X)

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


@dataclass(frozen=True)
class Response:
    """A message's ``extra.response``: the model's raw response as mini-swe-agent kept it."""

    usage: Usage  # its ``usage``, parsed (``usage.raw``: as stored)
    finish_reason: str | None  # of its first choice
    message: Mapping[str, Any] | None  # its first choice's message (checked like a chat message)


@dataclass(frozen=True)
class MiniMessage:
    index: int  # position in ``messages``
    role: str
    message: Mapping[str, Any]  # as stored: what the chat template renders
    tool_calls: tuple[Action, ...]  # an assistant message's tool calls, arguments parsed
    tool_call_id: str | None
    stored_actions: tuple[str, ...] | None  # ``extra.actions``' commands; None when not stored
    raw_output: str | None  # ``extra.raw_output``
    interrupt_type: str | None  # ``extra.interrupt_type`` (``FormatError``)
    exit_status: str | None  # ``extra.exit_status`` (the ``exit`` message)
    has_response: bool  # ``extra`` holds a ``response``: the message carries a model call
    response: Response | None
    timestamp: float | None  # ``extra.timestamp``

    @property
    def text(self) -> str:
        return content_text(self.message)

    @property
    def is_call(self) -> bool:
        """The message stands for one model call: an assistant reply, or a rejected response."""
        return self.role == "assistant" or self.has_response

    @property
    def in_prompt(self) -> bool:
        return self.role not in NON_PROMPT_ROLES


@dataclass(frozen=True)
class MiniTrajectory:
    source: Path
    format: str | None  # ``trajectory_format`` (None: not recorded)
    style: Style
    messages: tuple[MiniMessage, ...]
    exit_status: str  # ``info.exit_status``, else the last ``exit`` message's; "" when neither
    api_calls: int | None  # ``info.model_stats.api_calls``
    step_limit: int | None  # ``info.config.agent.step_limit``
    instance_id: str | None  # ``info.instance_id``
    #: the text actions' pattern the agent's config records: (``model`` 2.x | ``agent`` 1.x, regex)
    action_regex: tuple[str, str] | None

    def chat_messages(self) -> list[Mapping[str, Any]]:
        """Every message as stored (for :func:`forgetting.prompt.messages.segment`)."""
        return [m.message for m in self.messages]

    def prompt_messages(self) -> list[MiniMessage]:
        """The messages the model saw (``exit`` records dropped)."""
        return [m for m in self.messages if m.in_prompt]


def check_chat_message(f: Fields) -> tuple[Action, ...]:
    """Check the fields the chat template and the readers use; the tool calls, parsed."""
    content = f.data.get("content")
    if isinstance(content, list):
        for part in f.objects("content"):
            part.string("text")
    elif content is not None and not isinstance(content, str):
        raise f.error(f.name("content"), content, "a string, a list of content parts or null")
    f.string("reasoning_content")
    f.string("tool_call_id")
    for call in f.objects("tool_calls"):
        call.string("id")
        fn = call.obj("function", required=True, null=False)
        assert fn is not None
        fn.string("name", required=True, null=False)
        args = fn.data.get("arguments")
        if args is not None and not isinstance(args, str | Mapping):
            raise fn.error(fn.name("arguments"), args, "a JSON string, an object or null")
    return tuple(actions(f.data, None)) if f.data.get("tool_calls") else ()


def _response(extra: Fields) -> Response | None:
    r = extra.obj("response")
    if r is None:
        return None
    usage = parse_usage(r.mapping("usage"), f"{r.source}: {r.name('usage')}")
    choices = r.objects("choices")
    if not choices:
        return Response(usage, None, None)
    first = choices[0]
    message = first.obj("message")
    if message is not None:
        check_chat_message(message)
    return Response(usage, first.string("finish_reason"), message.data if message is not None else None)


def _message(f: Fields, index: int) -> MiniMessage:
    role = f.string("role", required=True, null=False)
    assert role is not None
    tool_calls = check_chat_message(f)
    extra = f.obj("extra") or Fields({}, f.source, f.name("extra"))
    stored: tuple[str, ...] | None = None
    if extra.items("actions") is not None:
        commands = []
        for action in extra.objects("actions"):
            command = action.string("command")
            if command is not None:
                commands.append(command)
        stored = tuple(commands)
    timestamp = extra.number("timestamp")
    return MiniMessage(
        index=index,
        role=role,
        message=f.data,
        tool_calls=tool_calls,
        tool_call_id=f.string("tool_call_id"),
        stored_actions=stored,
        raw_output=extra.string("raw_output"),
        interrupt_type=extra.string("interrupt_type"),
        exit_status=extra.string("exit_status"),
        has_response=extra.has("response"),
        response=_response(extra),
        timestamp=float(timestamp) if timestamp is not None else None,
    )


def parse_mini(data: Any, source: Path) -> MiniTrajectory:
    """A parsed mini-swe-agent trajectory (the ``{info, messages}`` object or a bare message
    list), checked field by field (see the module docstring)."""
    doc = Fields({"messages": data}, source) if isinstance(data, list) else Fields.of(data, source)
    fmt = doc.string("trajectory_format")
    if fmt is not None and fmt not in KNOWN_FORMATS:
        raise RunOutputError(f"{source}: unknown trajectory_format {fmt!r}; known: {', '.join(KNOWN_FORMATS)}")
    raw = doc.items("messages", required=True, null=False) or []
    messages = tuple(_message(Fields.of(m, source, f"messages[{i}]"), i) for i, m in enumerate(raw))
    empty = Fields({}, source)
    info = doc.obj("info") or empty
    stats = info.obj("model_stats") or empty
    config = info.obj("config") or empty
    regex: tuple[str, str] | None = None
    for section in ("model", "agent"):
        found = (config.obj(section) or empty).string("action_regex")
        if found is not None and regex is None:
            regex = (section, found)
    exit_status = info.string("exit_status") or ""
    if not exit_status:
        exits = [m for m in messages if m.role == "exit"]
        exit_status = (exits[-1].exit_status or "") if exits else ""
    return MiniTrajectory(
        source=source,
        format=fmt,
        style=detect_style([m.message for m in messages]),
        messages=messages,
        exit_status=exit_status,
        api_calls=stats.integer("api_calls"),
        step_limit=(config.obj("agent") or empty).integer("step_limit"),
        instance_id=info.string("instance_id"),
        action_regex=regex,
    )
