"""Prompts counted by the served model: its own chat template and tokenizer.

A model directory (``tokenizer.json``, ``tokenizer_config.json``, optionally
``chat_template.jinja``) or a template file given beside it (vLLM's ``--chat-template``,
``model.chat_template``) is rendered the way vLLM renders a chat request: vLLM hands the
request's messages and tools to the Hugging Face tokenizer's ``apply_chat_template``
(vLLM's ``vllm/entrypoints/chat_utils.py``, ``apply_hf_chat_template``), which renders the
Jinja template in a sandboxed environment with ``trim_blocks`` and ``lstrip_blocks``, a
``tojson`` filter that keeps non-ASCII text, ``raise_exception`` and ``strftime_now``, and the
tokenizer's special tokens as variables (transformers' ``utils/chat_template_utils.py``,
``render_jinja_template``); vLLM then encodes the text with ``add_special_tokens=False``
(vLLM's ``vllm/entrypoints/openai/serving_engine.py``). Before that, vLLM turns each tool
call's ``arguments`` string into an object (``_postprocess_messages`` in ``chat_utils.py``) and
a list of text parts into one string joined with newlines (the ``string`` content format).
Here the text is encoded with the ``tokenizers`` library from the same ``tokenizer.json``.

Blocks: the rendered prompt is cut before every occurrence of the template's block marker
(the special token its text starts with, ``<|im_start|>`` for ChatML). The tokenizer splits
its input at special tokens before anything else, so the prompt's token ids are exactly the
concatenation of each block's own ids: a block is tokenized once per run and the call log
stores it once (a segment), as for :mod:`forgetting.prompt.chat_format`. Where the template writes
one block per message (ChatML, Qwen's templates for every role but grouped tool results), a
block's segment records its message; a block the template adds (a default system prompt)
is marked ``implicit``; otherwise a block records its role and rendered text.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forgetting.foundation.errors import ConfigError, UserError
from forgetting.foundation.seeds import text_hex

Message = Mapping[str, Any]


class TemplateError(UserError):
    """The served model's chat template failed on a request (the message says why)."""


def _tojson(value: Any, indent: int | None = None, separators: tuple[str, str] | None = None,
            sort_keys: bool = False) -> str:
    # transformers' ``tojson``: non-ASCII kept, keys in their order unless asked
    return json.dumps(value, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys)


def _raise(message: str) -> None:
    raise TemplateError(f"the chat template refused the request: {message}")


def _strftime_now(fmt: str) -> str:
    return dt.datetime.now().strftime(fmt)


def _token_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


@dataclass(frozen=True)
class ModelFiles:
    """Where a served model's tokenizer and chat template are read from."""

    tokenizer_json: Path
    template: str
    template_source: Path
    special: dict[str, str]

    @classmethod
    def find(cls, model_dir: str | os.PathLike[str], template: str | os.PathLike[str] | None = None) -> ModelFiles:
        """The files of ``model_dir``; ``template`` replaces its own chat template."""
        d = Path(os.path.expandvars(os.path.expanduser(str(model_dir))))
        tok = d / "tokenizer.json"
        if not tok.is_file():
            raise ConfigError(f"{d}: no tokenizer.json; give the served model's directory "
                              "(model.tokenizer_dir, model.vllm.model_dir) or set model.tokenizer: qwen2.5")
        config: dict[str, Any] = {}
        cfg = d / "tokenizer_config.json"
        if cfg.is_file():
            try:
                config = json.loads(cfg.read_text(encoding="utf-8"))
            except ValueError as exc:
                raise ConfigError(f"{cfg}: not JSON ({exc})") from None
        special = {name: text for name in ("bos_token", "eos_token", "unk_token", "pad_token")
                   if (text := _token_text(config.get(name))) is not None}
        if template is not None:
            source = Path(os.path.expandvars(os.path.expanduser(str(template))))
            try:
                text = source.read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigError(f"model.chat_template: cannot read {source}: {exc.strerror or exc}") from None
        elif (d / "chat_template.jinja").is_file():
            source = d / "chat_template.jinja"
            text = source.read_text(encoding="utf-8")
        elif isinstance(config.get("chat_template"), str):
            source, text = cfg, str(config["chat_template"])
        else:
            raise ConfigError(f"{d}: no chat template (tokenizer_config.json's chat_template, chat_template.jinja); "
                              "give one with model.chat_template")
        return cls(tok, text, source, special)


def _vllm_message(message: Message) -> dict[str, Any]:
    """A request message as vLLM gives it to the template (see the module docstring)."""
    out = dict(message)
    content = out.get("content")
    if isinstance(content, list):
        out["content"] = "\n".join(str(p.get("text", "")) for p in content
                                   if isinstance(p, Mapping) and p.get("type", "text") == "text")
    calls = out.get("tool_calls")
    if isinstance(calls, list) and calls:
        fixed = []
        for call in calls:
            call = dict(call) if isinstance(call, Mapping) else call
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, Mapping) and isinstance(fn.get("arguments"), str):
                try:
                    args = json.loads(fn["arguments"]) if fn["arguments"] else {}
                except ValueError:
                    args = fn["arguments"]
                call["function"] = {**fn, "arguments": args}
            fixed.append(call)
        out["tool_calls"] = fixed
    return out


@dataclass(frozen=True)
class Block:
    """One block of a rendered prompt: its text, the message it renders (None: the template
    added it, or it spans several messages) and its role."""

    text: str
    role: str


class ServedFormat:
    """A served model's chat format: messages → blocks of token ids (see the module docstring)."""

    def __init__(self, files: ModelFiles) -> None:
        import jinja2
        import jinja2.ext
        import jinja2.sandbox
        import tokenizers

        self.files = files
        self._tok = tokenizers.Tokenizer.from_file(str(files.tokenizer_json))
        env = jinja2.sandbox.ImmutableSandboxedEnvironment(
            trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
        env.filters["tojson"] = _tojson
        env.globals["raise_exception"] = _raise
        env.globals["strftime_now"] = _strftime_now
        try:
            self._template = env.from_string(files.template)
        except jinja2.TemplateError as exc:
            raise ConfigError(f"{files.template_source}: the chat template does not compile: {exc}") from None
        tok_hash = text_hex(files.tokenizer_json.read_text(encoding="utf-8"))[:16]
        self.tokenizer_name = f"served:{tok_hash}"
        self.name = f"template:{text_hex(files.template)[:16]}"
        probe = [{"role": "user", "content": "x"}]
        with_gen, without = self._render(probe, None, True), self._render(probe, None, False)
        if not with_gen.startswith(without):
            raise ConfigError(f"{files.template_source}: the generation prompt is not a suffix of the prompt; "
                              "this template cannot be counted block by block")
        self.generation_text = with_gen[len(without):]
        self.generation_ids: list[int] = self._encode(self.generation_text)
        marker = self._tok.id_to_token(self._encode(without)[0]) if without else None
        specials = {t.content for t in self._tok.get_added_tokens_decoder().values() if t.special}
        if marker is None or marker not in specials:
            raise ConfigError(f"{files.template_source}: the rendered prompt does not start with a special token; "
                              "this template cannot be counted block by block")
        self.marker: str = marker
        self._ids: dict[str, list[int]] = {}
        #: the last request's messages and their conversion (a history grows by appending)
        self._prev: tuple[list[Message], list[dict[str, Any]]] = ([], [])
        #: the last request's conversion, tools and blocks, for :meth:`blocks` to extend
        self._last: tuple[list[dict[str, Any]], Any, list[Block]] | None = None
        self.incremental = False
        self.incremental = self._local_on_probe()

    def _render(self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None,
                generation: bool) -> str:
        import jinja2

        try:
            return self._template.render(messages=list(messages), tools=list(tools) if tools else None,
                                         add_generation_prompt=generation, **self.files.special)
        except TemplateError:
            raise
        except (jinja2.TemplateError, TypeError, ValueError, KeyError, AttributeError) as exc:
            raise TemplateError(f"the chat template ({self.files.template_source}) failed: "
                                f"{type(exc).__name__}: {exc}") from None

    def _encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def render(self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None) -> str:
        """The prompt's text as vLLM renders it, generation prompt included."""
        return self._render(self._converted(list(messages)), tools, True)

    def _converted(self, messages: list[Message]) -> list[dict[str, Any]]:
        """The messages as vLLM hands them to the template; the previous request's
        conversions reused for its messages that come back equal."""
        prev, done = self._prev
        n = len(prev)
        if n and len(messages) >= n and messages[:n] == prev:
            out = done[:n] + [_vllm_message(m) for m in messages[n:]]
        else:  # a rewritten history (deletion): only the messages that changed are converted again
            out = [done[i] if i < n and m == prev[i] else _vllm_message(m) for i, m in enumerate(messages)]
        self._prev = ([dict(m) for m in messages], out)
        return out

    def blocks(self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None) -> list[Block]:
        """The prompt's blocks before the generation prompt.

        Incremental: a request whose history shares its first messages with the previous
        request's renders only a window — the first message, the last unchanged one and every
        message from the first changed or new one on — instead of the whole history (the
        template's cost grows with the number of messages, not their length). That is the
        common case twice over: an agent appends its turn and the tool's output, and a
        deletion rewrites a turn a few turns back. The window's first blocks must come out
        equal to the previous request's blocks of the same messages, else the whole history
        is rendered; and a template is rendered this way only if, on a probe history of every
        role, windows compose to exactly the whole render, both as the history grows and when
        one of its messages is rewritten (:meth:`_local_on_probe`), i.e. it renders each
        message on its own, as ChatML templates do. Anything else (a change in the first two
        messages, other tools) renders the whole prompt."""
        conv = self._converted(list(messages))
        out = self._extended(conv, tools) if self.incremental else None
        if out is None:
            out = self._whole_blocks(conv, tools)
        self._last = (conv, list(tools) if tools else None, out)
        return out

    def _extended(self, conv: list[dict[str, Any]], tools: Sequence[Mapping[str, Any]] | None) -> list[Block] | None:
        """The blocks of ``conv`` from the previous request's by a window's render, or None."""
        if self._last is None:
            return None
        prev, prev_tools, prev_blocks = self._last
        n, extra = len(prev), len(prev_blocks) - len(prev)
        if n < 2 or extra not in (0, 1) or (list(tools) if tools else None) != prev_tools:
            return None
        same = min(n, len(conv))  # the messages before the first changed or new one
        for i in range(same):
            if conv[i] is not prev[i] and conv[i] != prev[i]:
                same = i
                break
        if same < 2:
            return None  # a change in the first two messages
        window = self._whole_blocks(conv[:1] + conv[same - 1:], tools)
        head = extra + 1
        if (len(window) != head + 1 + len(conv) - same or window[:head] != prev_blocks[:head]
                or window[head] != prev_blocks[extra + same - 1]):
            return None
        return prev_blocks[: extra + same] + window[head + 1:]

    def _local_on_probe(self) -> bool:
        """Whether windows compose to the whole render on a probe history of every role
        (both message styles: text actions, tool calls and their results)."""
        call = {"id": "p1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
        probe: list[Message] = [
            {"role": "system", "content": "s"}, {"role": "user", "content": "u0"},
            {"role": "assistant", "content": "a1"}, {"role": "user", "content": "u1"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "p1", "content": "t1"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "p1", "content": "t2"}, {"role": "user", "content": "u2"},
            {"role": "assistant", "content": "a3"}, {"role": "user", "content": "u3"},
        ]
        tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
        saved = self._prev
        try:
            for t in (None, tools):
                for first in (0, 1):  # with and without a system message
                    self._last = None
                    for k in range(2 + first, len(probe) + 1):
                        conv = [_vllm_message(m) for m in probe[first:k]]
                        whole = self._whole_blocks(conv, t)
                        got = self._extended(conv, t)
                        if got is not None and got != whole:
                            return False
                        if got is None and k - first > 2:
                            return False  # a window refused where the history grew
                        self._last = (conv, list(t) if t else None, whole)
                    # then each message after the first two rewritten, as a deletion does
                    full = [_vllm_message(m) for m in probe[first:]]
                    for j in range(2, len(full)):
                        changed = [*full[:j], _rewritten(full[j]), *full[j + 1:]]
                        self._last = (full, list(t) if t else None, self._whole_blocks(full, t))
                        got = self._extended(changed, t)
                        if got is None or got != self._whole_blocks(changed, t):
                            return False
        except TemplateError:
            return False
        finally:
            self._last, self._prev = None, saved
        return True

    def _whole_blocks(self, conv: list[dict[str, Any]], tools: Sequence[Mapping[str, Any]] | None) -> list[Block]:
        """The blocks of the converted messages ``conv``, rendered whole."""
        text = self._render(conv, tools, True)
        if not text.endswith(self.generation_text):
            raise TemplateError(f"the chat template ({self.files.template_source}) rendered a prompt that does "
                                "not end with its generation prompt")
        body = text[: len(text) - len(self.generation_text)]
        m = self.marker
        parts = body.split(m)
        out = [Block(parts[0], "")] if parts[0] else []
        for part in parts[1:]:
            role = part.split("\n", 1)[0].strip()
            out.append(Block(m + part, role))
        return out

    def ids(self, text: str) -> list[int]:
        """A block's token ids (memoized: a run's blocks repeat at every call)."""
        found = self._ids.get(text)
        if found is None:
            found = self._ids[text] = self._encode(text)
        return found

    def prompt_token_ids(self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None) -> list[int]:
        """The whole prompt's ids, generation prompt included."""
        out: list[int] = []
        for b in self.blocks(messages, tools):
            out += self.ids(b.text)
        return out + self.generation_ids

    def describe(self) -> dict[str, Any]:
        """What the call log's header records of it."""
        return {
            "method": "served",
            "tokenizer": self.tokenizer_name,
            "tokenizer_file": str(self.files.tokenizer_json),
            "chat_template": self.name,
            "chat_template_file": str(self.files.template_source),
            "generation_prompt_ids": list(self.generation_ids),
        }


def _rewritten(message: dict[str, Any]) -> dict[str, Any]:
    """A probe message with its text replaced, as a deletion replaces it."""
    content = message.get("content")
    return {**message, "content": "[deleted]" if content else "[deleted] "}


@functools.cache
def load(model_dir: str, template: str | None = None) -> ServedFormat:
    """The served format of ``model_dir`` (loaded once per process)."""
    return ServedFormat(ModelFiles.find(model_dir, template))


@dataclass(frozen=True)
class Counting:
    """How a proxy counts its run's prompts: ``served`` with the served model's own
    format (``served``; None: the server renders :mod:`forgetting.prompt.chat_format` itself, as
    the scripted model does), or ``approximation`` (:mod:`forgetting.prompt.chat_format` for a
    server whose tokenizer is not at hand)."""

    method: str = "approximation"
    served: ServedFormat | None = None

    def header(self) -> dict[str, Any]:
        """The call log header's ``prompt_count``."""
        if self.served is not None:
            return self.served.describe()
        return {"method": self.method, "tokenizer": "qwen2.5", "chat_template": "qwen3-coder"}
