"""The scripted model as a Chat Completions endpoint: request in, response out (no HTTP).

A deterministic stand-in for the LLM, named as such in every response (``model``,
``system_fingerprint`` and a ``scripted_stand_in`` field). It answers in the style the
request asks for: OpenAI tool calls (``tools`` given: ``tool_calls`` with the ``bash`` tool —
and, where the agent offers them, Trae's editor and its finishing tool ``task_done`` —,
reasoning in ``content``) or text actions (no tools: reasoning and one fenced
``mswea_bash_command`` block — or ``bash`` when the prompt asks for that, as 1.x did).
``usage`` holds real token counts in the model's chat format (Qwen vocabulary) and
``prompt_tokens_details.cached_tokens`` from an emulated vLLM prefix cache.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from forgetting.demo.scripted.commands import Toolset, tool_call
from forgetting.demo.scripted.draws import Draws, run_key_for
from forgetting.demo.scripted.history import fenced_actions, reconstruct, task_text_of
from forgetting.demo.scripted.knowledge import TaskBook
from forgetting.demo.scripted.policy import Decision, Policy, unknown_task
from forgetting.demo.scripted.prefix_cache import PrefixCache
from forgetting.demo.scripted.settings import ScriptedSettings
from forgetting.foundation.seeds import key_hex
from forgetting.prompt import chat_format, tokenizer

#: runs whose emulated prefix caches are kept at once (least recently used dropped)
MAX_RUN_CACHES = 64

STAND_IN = "scripted stand-in for an LLM: a deterministic policy, not a language model"
FINGERPRINT = "forgetting-scripted-stand-in-v1"
SEED_HEADER = "X-Forgetting-Seed"


class BadRequest(ValueError):
    """A request the endpoint cannot answer (HTTP 400)."""


def _check_request(request: Any) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]] | None]:
    if not isinstance(request, Mapping):
        raise BadRequest("the request body must be a JSON object")
    messages = request.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list")
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or not isinstance(m.get("role"), str):
            raise BadRequest(f"messages[{i}] must be an object with a 'role'")
    tools = request.get("tools") or None
    if tools is not None and not isinstance(tools, list):
        raise BadRequest("'tools' must be a list")
    if request.get("stream"):
        raise BadRequest("streaming is not supported by the scripted stand-in")
    return messages, tools


def _tool_name(tools: Sequence[Mapping[str, Any]]) -> str:
    names = [str((t.get("function") or t).get("name", "")) for t in tools if isinstance(t, Mapping)]
    return "bash" if "bash" in names or not names else names[0]


def fence_of(messages: Sequence[Mapping[str, Any]]) -> str:
    """The fence the stand-in writes its text actions in: ``mswea_bash_command`` when the
    prompt shows it (mini-swe-agent 2.x), else ``bash`` (as 1.x asked)."""
    preamble = "\n".join(chat_format.content_text(m) for m in messages if m.get("role") in ("system", "user"))
    return "mswea_bash_command" if "mswea_bash_command" in preamble else "bash"


def _function(command: str, shell: str, toolset: Toolset) -> dict[str, str]:
    """The function call of one action: a tool call the policy chose, else the shell tool."""
    call = tool_call(command, toolset.root)
    name, args = call if call is not None else (shell, {"command": command})
    return {"name": name, "arguments": json.dumps(args)}


def render(
    decision: Decision,
    *,
    tools: Sequence[Mapping[str, Any]] | None,
    fence: str,
    id_seed: str,
    toolset: Toolset | None = None,
) -> dict:
    """The assistant message for a decision, in the requested style."""
    if tools:
        name = _tool_name(tools)
        calls = [
            {
                "id": "call_" + key_hex(id_seed, k)[:24],
                "type": "function",
                "function": _function(c, name, toolset or Toolset()),
            }
            for k, c in enumerate(decision.commands)
        ]
        return {"role": "assistant", "content": decision.reasoning, "tool_calls": calls}
    # text actions: exactly one command per reply
    return {
        "role": "assistant",
        "content": f"THOUGHT: {decision.reasoning}\n\n```{fence}\n{decision.commands[0]}\n```",
    }


class ScriptedModel:
    """The policy behind an OpenAI-compatible ``chat.completions`` call."""

    def __init__(
        self, book: TaskBook, settings: ScriptedSettings, *, served_name: str = "scripted"
    ) -> None:
        self.book = book
        self.settings = settings
        self.served_name = served_name
        self.cache = PrefixCache(self.settings.cache_blocks)
        self._run_caches: OrderedDict[str, PrefixCache] = OrderedDict()
        self._caches_lock = threading.Lock()

    def cache_for(self, run_key: str) -> PrefixCache:
        """The emulated prefix cache a request of run ``run_key`` meets: the run's own
        (``cache_per_run``, the default: reported hits do not depend on which runs happened to
        share a server, so a rerun reports the same) or the server's shared one (as vLLM)."""
        if not self.settings.cache_per_run:
            return self.cache
        with self._caches_lock:
            cache = self._run_caches.pop(run_key, None) or PrefixCache(self.settings.cache_blocks)
            self._run_caches[run_key] = cache
            while len(self._run_caches) > MAX_RUN_CACHES:
                self._run_caches.popitem(last=False)
            return cache

    def decide(
        self, messages: Sequence[Mapping[str, Any]], tools: Any, seed_header: str | None
    ) -> tuple[Decision, str]:
        """The next decision and the id of the task it was identified as ('' when unknown)."""
        task_text = task_text_of(messages)
        task = self.book.identify(task_text)
        toolset = Toolset.offered(tools, task_text)
        conversation = reconstruct(messages, task, fenced_actions(fence_of(messages)), toolset)
        draws = Draws(self.settings.seed, run_key_for(seed_header, task_text), conversation.call_index)
        if task is None:
            return unknown_task(toolset), ""
        policy = Policy(task, conversation, draws, self.settings, multi_call=bool(tools), tools=toolset)
        return policy.decide(), task.instance_id

    def tokenize(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Answer a ``POST /tokenize`` request as vLLM does for chat messages: the prompt's
        token ids in the served model's chat format, the generation prompt included (what
        ``prompt_tokens`` of a completion counts)."""
        messages, tools = _check_request(request)
        tokens = chat_format.prompt_token_ids(messages, tools)
        return {"count": len(tokens), "tokens": tokens}

    def complete(self, request: Mapping[str, Any], seed_header: str | None = None) -> dict[str, Any]:
        """Answer one Chat Completions request (the body as parsed JSON)."""
        messages, tools = _check_request(request)
        decision, task_id = self.decide(messages, tools, seed_header)
        task_text = task_text_of(messages)
        run_key = run_key_for(seed_header, task_text)
        n_assistant = sum(1 for m in messages if m.get("role") == "assistant")
        message = render(
            decision,
            tools=tools,
            fence=fence_of(messages),
            id_seed=f"{run_key}/{n_assistant + 1}",
            toolset=Toolset.offered(tools, task_text),
        )

        completion = chat_format.completion_token_ids(message)
        finish = "tool_calls" if tools else "stop"
        limit = request.get("max_completion_tokens") or request.get("max_tokens")
        if isinstance(limit, int) and 0 < limit < len(completion):
            content_ids = tokenizer.encode(chat_format.content_text(message))[:limit]
            message = {"role": "assistant", "content": tokenizer.decode(content_ids)}
            completion, finish = content_ids, "length"
        prompt = chat_format.prompt_token_ids(messages, tools)
        cached = self.cache_for(run_key).lookup_and_store(prompt)
        return {
            "id": "chatcmpl-" + key_hex(run_key, n_assistant, json.dumps(message, sort_keys=True))[:24],
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.served_name,
            "system_fingerprint": FINGERPRINT,
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {
                "prompt_tokens": len(prompt),
                "completion_tokens": len(completion),
                "total_tokens": len(prompt) + len(completion),
                "prompt_tokens_details": {"cached_tokens": cached},
            },
            "scripted_stand_in": {"note": STAND_IN, "task": task_id or None, "policy_step": decision.step},
        }
