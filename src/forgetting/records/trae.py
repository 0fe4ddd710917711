"""Trae agent trajectories (bytedance/trae-agent's ``TrajectoryRecorder`` JSON): the one parse.

The file holds ``llm_interactions`` — one per model call, in order; each has the
``input_messages`` *new* to that call and the ``response`` with its ``tool_calls``
(``call_id``, ``name``, ``arguments``) — and ``agent_steps``, whose ``tool_results`` repeat
the results of each step's calls. A tool result reaches the model as the next call's input
message ``{"role": "user", "tool_result": {call_id, success, result, error}}``; the last
call's results appear only in ``agent_steps``. Besides: ``max_steps``, ``success``,
``final_result``, ``end_time``.

:func:`parse_trae` checks every field a reader uses and yields a :class:`TraeTrajectory`; a
wrongly typed field is one error line naming the file and the field
(``llm_interactions[0] is the number 1, expected an object``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forgetting.records.fields import Fields


@dataclass(frozen=True)
class TraeToolCall:
    call_id: str | None
    name: str
    arguments: Mapping[str, Any]  # parsed (a string that is no JSON object: ``{"_raw": …}``)


@dataclass(frozen=True)
class TraeToolResult:
    call_id: str
    success: bool | None
    result: str | None
    error: str | None

    def text(self) -> str:
        """The result as the model received it (what Trae's Chat Completions clients send):
        the result, then ``Tool call failed with error:`` and the error, stripped."""
        text = ""
        if self.result:
            text += f"{self.result}\n"
        if self.error:
            text += f"Tool call failed with error:\n{self.error}"
        return text.strip()


@dataclass(frozen=True)
class TraeInteraction:
    """One model call."""

    tool_results: tuple[TraeToolResult, ...]  # the results its input messages carried
    tool_calls: tuple[TraeToolCall, ...]  # its response's tool calls


@dataclass(frozen=True)
class TraeStep:
    tool_results: tuple[TraeToolResult, ...]
    error: str | None


@dataclass(frozen=True)
class TraeTrajectory:
    source: Path
    interactions: tuple[TraeInteraction, ...]
    steps: tuple[TraeStep, ...]
    max_steps: int | None
    success: bool
    final_result: str
    end_time: str | None

    def results(self) -> dict[str, TraeToolResult]:
        """Every tool result by call id; what the model was sent wins over ``agent_steps``."""
        found: dict[str, TraeToolResult] = {}
        for step in self.steps:
            for r in step.tool_results:
                found.setdefault(r.call_id, r)
        for it in self.interactions:
            for r in it.tool_results:
                found[r.call_id] = r
        return found


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, Mapping):
        return dict(raw)
    if isinstance(raw, str):
        try:
            value = json.loads(raw) if raw else {}
        except (ValueError, RecursionError):
            return {"_raw": raw}
        return dict(value) if isinstance(value, Mapping) else {"_raw": raw}
    return {}


def _result(r: Fields) -> TraeToolResult | None:
    """A tool result; None for one without a call id (nothing can be matched to it)."""
    call_id = r.data.get("call_id")
    if call_id is not None and not isinstance(call_id, str | int):
        raise r.error(r.name("call_id"), call_id, "a string")
    success, result, error = r.boolean("success"), r.string("result"), r.string("error")
    if not call_id:
        return None
    return TraeToolResult(str(call_id), success, result, error)


def _results(items: list[Fields]) -> tuple[TraeToolResult, ...]:
    return tuple(r for r in (_result(x) for x in items) if r is not None)


def _tool_call(c: Fields) -> TraeToolCall:
    call_id = c.data.get("call_id")
    if call_id is not None and not isinstance(call_id, str | int):
        raise c.error(c.name("call_id"), call_id, "a string")
    name = c.string("name") or ""
    args = c.data.get("arguments")
    if args is not None and not isinstance(args, str | Mapping):
        raise c.error(c.name("arguments"), args, "an object, a JSON string or null")
    return TraeToolCall(None if call_id is None else str(call_id), name, _arguments(args))


def _interaction(it: Fields) -> TraeInteraction:
    results: list[Fields] = []
    for m in it.objects("input_messages"):
        r = m.obj("tool_result")
        if r is not None:
            results.append(r)
    response = it.obj("response") or Fields({}, it.source, it.name("response"))
    return TraeInteraction(_results(results), tuple(_tool_call(c) for c in response.objects("tool_calls")))


def parse_trae(data: Any, source: Path) -> TraeTrajectory:
    """A parsed Trae agent trajectory, checked field by field (see the module docstring)."""
    doc = Fields.of(data, source)
    interactions = doc.objects("llm_interactions", required=True, null=False)
    steps = tuple(TraeStep(_results(s.objects("tool_results")), s.string("error")) for s in doc.objects("agent_steps"))
    return TraeTrajectory(
        source=source,
        interactions=tuple(_interaction(it) for it in interactions),
        steps=steps,
        max_steps=doc.integer("max_steps"),
        success=bool(doc.boolean("success")),
        final_result=doc.string("final_result") or "",
        end_time=doc.string("end_time"),
    )
