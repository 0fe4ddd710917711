"""The model's chat format: messages → prompt token ids, message by message.

Follows the structure of Qwen3-Coder's chat template: ``<|im_start|>{role}\\n…<|im_end|>\\n``
blocks; tool definitions appended to the system block; assistant tool calls as
``<tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>\\n</function>\\n</tool_call>``;
consecutive ``tool`` messages grouped in one ``user`` block, each inside
``<tool_response>\\n…\\n</tool_response>\\n``; ``reasoning_content`` (when an agent sends it)
as ``<think>\\n…\\n</think>\\n\\n`` before the content. Approximation, documented in
config/README.md: the wording of the tools block is ours, not the template's verbatim text.

Because every block starts with a special token, the prompt's token ids are exactly the
concatenation of each message's *segment* ids, followed by the generation prompt. A
segment depends only on its message, on whether the neighbouring messages are tool
messages, and (for the first system message) on the tool definitions; that is what lets
the call log store each distinct segment once and the cost stage work per message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from forgetting.foundation.seeds import text_hex
from forgetting.prompt import tokenizer

FORMAT_NAME = "qwen3-coder"
DEFAULT_SYSTEM_WITH_TOOLS = "You are Qwen, a helpful AI assistant that can interact with a computer to solve tasks."

Message = Mapping[str, Any]


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def content_text(message: Message) -> str:
    """A message's content as text (OpenAI content-part lists are joined)."""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, Mapping))
    return str(content)


def _tools_text(tools: Sequence[Mapping[str, Any]]) -> str:
    out = ["\n\n# Tools\n\nYou have access to the following functions:\n\n<tools>"]
    for tool in tools:
        fn = tool.get("function", tool)
        out.append(f"\n<function>\n<name>{fn.get('name', '')}</name>")
        if fn.get("description"):
            out.append(f"\n<description>{str(fn['description']).strip()}</description>")
        params = (fn.get("parameters") or {}).get("properties") or {}
        out.append("\n<parameters>")
        for pname, pdef in params.items():
            out.append(f"\n<parameter>\n<name>{pname}</name>")
            if isinstance(pdef, Mapping):
                if pdef.get("type"):
                    out.append(f"\n<type>{pdef['type']}</type>")
                if pdef.get("description"):
                    out.append(f"\n<description>{str(pdef['description']).strip()}</description>")
            out.append("\n</parameter>")
        required = (fn.get("parameters") or {}).get("required")
        if required:
            out.append(f"\n<required>{canonical_json(required)}</required>")
        out.append("\n</parameters>\n</function>")
    out.append(
        "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:"
        "\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1"
        "\n</parameter>\n</function>\n</tool_call>"
    )
    return "".join(out)


def _tool_call_arguments(call: Mapping[str, Any]) -> list[tuple[str, str]]:
    fn = call.get("function") or {}
    raw = fn.get("arguments", "")
    if isinstance(raw, Mapping):
        args: Any = raw
    else:
        try:
            args = json.loads(raw) if raw else {}
        except (TypeError, ValueError, RecursionError):
            return [("arguments", str(raw))]
    if not isinstance(args, Mapping):
        return [("arguments", str(raw))]
    return [(str(k), v if isinstance(v, str) else canonical_json(v)) for k, v in args.items()]


def tool_calls_text(message: Message) -> list[tuple[str, str]]:
    """The text inside each ``<tool_call>…</tool_call>`` of an assistant message."""
    out = []
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        body = f"\n<function={fn.get('name', '')}>\n"
        for key, value in _tool_call_arguments(call):
            body += f"<parameter={key}>\n{value}\n</parameter>\n"
        body += "</function>\n"
        out.append((call.get("id", ""), body))
    return out


@dataclass(frozen=True)
class SegmentContext:
    """What besides the message itself decides its rendering."""

    tools_id: str | None = None  # the tool definitions, for the first system message
    opens_tool_block: bool = True  # a tool message that starts the grouped user block
    closes_tool_block: bool = True  # a tool message that ends it


def _assistant_ids(message: Message) -> list[int]:
    """The assistant block after ``<|im_start|>``, before ``<|im_end|>``."""
    reasoning = message.get("reasoning_content")
    content = content_text(message).strip()
    if reasoning:
        ids = tokenizer.encode("assistant\n")
        ids.append(tokenizer.special("<think>"))
        ids += tokenizer.encode("\n" + str(reasoning).strip() + "\n")
        ids.append(tokenizer.special("</think>"))
        ids += tokenizer.encode("\n\n" + (content + "\n" if content else ""))
    else:
        ids = tokenizer.encode("assistant" + ("\n" + content + "\n" if content else ""))
    for i, (_, body) in enumerate(tool_calls_text(message)):
        if i > 0 or not (content or reasoning):
            ids += tokenizer.encode("\n")
        ids.append(tokenizer.special("<tool_call>"))
        ids += tokenizer.encode(body)
        ids.append(tokenizer.special("</tool_call>"))
    return ids


def segment_ids(message: Message, ctx: SegmentContext, tools: Sequence[Mapping[str, Any]] | None = None) -> list[int]:
    """Token ids of one message's block in the prompt."""
    im_start, im_end = tokenizer.special("<|im_start|>"), tokenizer.special("<|im_end|>")
    role = message.get("role", "user")
    ids: list[int] = []
    if role == "tool":
        if ctx.opens_tool_block:
            ids.append(im_start)
            ids += tokenizer.encode("user\n")
        ids.append(tokenizer.special("<tool_response>"))
        ids += tokenizer.encode("\n" + content_text(message) + "\n")
        ids.append(tokenizer.special("</tool_response>"))
        ids += tokenizer.encode("\n")
        if ctx.closes_tool_block:
            ids.append(im_end)
            ids += tokenizer.encode("\n")
        return ids
    ids.append(im_start)
    if role == "assistant":
        ids += _assistant_ids(message)
    else:
        text = f"{role}\n{content_text(message)}"
        if role == "system" and tools:
            text += _tools_text(tools)
        ids += tokenizer.encode(text)
    ids.append(im_end)
    ids += tokenizer.encode("\n")
    return ids


def tools_id(tools: Sequence[Mapping[str, Any]] | None) -> str | None:
    if not tools:
        return None
    return text_hex(canonical_json(list(tools)))[:16]


#: the contexts without tools, shared (building thousands of frozen dataclasses per prompt is slow)
_PLAIN = {(o, c): SegmentContext(None, o, c) for o in (True, False) for c in (True, False)}


def contexts(messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None) -> list[SegmentContext]:
    """The rendering context of each message of a prompt."""
    tid = tools_id(tools)
    out = []
    first_system_seen = False
    n = len(messages)
    for i, m in enumerate(messages):
        role = m.get("role")
        if role == "tool":
            opens = i == 0 or messages[i - 1].get("role") != "tool"
            closes = i == n - 1 or messages[i + 1].get("role") != "tool"
            out.append(_PLAIN[opens, closes])
        elif role == "system" and not first_system_seen:
            first_system_seen = True
            out.append(SegmentContext(tid) if i == 0 and tid else _PLAIN[True, True])
        else:
            out.append(_PLAIN[True, True])
    return out


def segment_key(message: Message, ctx: SegmentContext) -> str:
    """A content address for a message's segment: equal keys give equal token ids, and the same
    message back (every key counts, also those the template does not render, such as
    ``tool_call_id``: two tool results with the same text stay two messages in a call log)."""
    payload = {
        "m": dict(message),
        "t": ctx.tools_id,
        "o": ctx.opens_tool_block,
        "c": ctx.closes_tool_block,
    }
    return text_hex(canonical_json(payload))[:20]


@dataclass(frozen=True)
class Segment:
    """One block of a prompt: its content address, token ids and message index (None for
    the system block the template adds when tools are given without a system message)."""

    key: str
    ids: list[int]
    message_index: int | None


def segment_plan(
    messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None = None
) -> list[tuple[Message, SegmentContext, int | None]]:
    """The prompt's blocks in order, before tokenization: (message, context, message index),
    the index None for the system block the template adds when tools come without one."""
    out: list[tuple[Message, SegmentContext, int | None]] = []
    if tools and (not messages or messages[0].get("role") != "system"):
        implicit = {"role": "system", "content": DEFAULT_SYSTEM_WITH_TOOLS}
        out.append((implicit, SegmentContext(tools_id(tools)), None))
    for i, (m, c) in enumerate(zip(messages, contexts(messages, tools), strict=True)):
        out.append((m, c, i))
    return out


def prompt_segments(messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None = None) -> list[Segment]:
    """The prompt's blocks in order; the prompt is their ids + :func:`generation_prompt_ids`."""
    return [
        Segment(segment_key(m, c), segment_ids(m, c, tools if c.tools_id else None), i)
        for m, c, i in segment_plan(messages, tools)
    ]


def generation_prompt_ids() -> list[int]:
    return [tokenizer.special("<|im_start|>"), *tokenizer.encode("assistant\n")]


def prompt_token_ids(messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None = None) -> list[int]:
    """The whole prompt of a call, generation prompt included."""
    ids: list[int] = []
    for seg in prompt_segments(messages, tools):
        ids += seg.ids
    return ids + generation_prompt_ids()


def completion_token_ids(message: Message) -> list[int]:
    """Token ids the model generates for an assistant message, after the generation
    prompt, up to and including ``<|im_end|>``."""
    ids: list[int] = []
    reasoning = message.get("reasoning_content")
    content = content_text(message).strip()
    if reasoning:
        ids.append(tokenizer.special("<think>"))
        ids += tokenizer.encode("\n" + str(reasoning).strip() + "\n")
        ids.append(tokenizer.special("</think>"))
        ids += tokenizer.encode("\n\n")
    if content:
        ids += tokenizer.encode(content)
    for i, (_, body) in enumerate(tool_calls_text(message)):
        if i > 0 or content:
            ids += tokenizer.encode("\n")
        ids.append(tokenizer.special("<tool_call>"))
        ids += tokenizer.encode(body)
        ids.append(tokenizer.special("</tool_call>"))
    return [*ids, tokenizer.special("<|im_end|>")]
