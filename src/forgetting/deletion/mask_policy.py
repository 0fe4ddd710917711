"""Observation masking: the baseline the context-management literature compares against.

The tool outputs of the last ``M`` turns stay verbatim; every older tool output is replaced
by a one-line placeholder naming how many lines were omitted (by default
``[{lines} lines of old tool output omitted]``; ``{lines}`` is filled per message). Reasoning
and actions are never touched. Deterministic: no draw, so every run of a task masks the same
way. With one tool call per turn (mini-swe-agent) this keeps the last ``M`` tool outputs.

Config entry: ``policy: mask``, ``keep_last`` (M ≥ 0), optional ``placeholder`` (one line,
with ``{lines}``). Name: ``mask{M}``, e.g. ``mask10``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from forgetting.deletion.names import numbered
from forgetting.deletion.policy import HistoryView, Policy, PolicyContext, Rewrite, whole_tool_outputs
from forgetting.deletion.random_policy import check_keys, integer
from forgetting.foundation.errors import ConfigError
from forgetting.grid import Deletion

DEFAULT_MASK_PLACEHOLDER = "[{lines} lines of old tool output omitted]"
_KEYS = ("name", "policy", "keep_last", "placeholder")


class ObservationMasking(Policy):
    name = "mask"
    name_scheme = "mask{M}"

    def decide(self, view: HistoryView) -> list[Rewrite]:
        placeholder = str(self.deletion.params.get("placeholder", DEFAULT_MASK_PLACEHOLDER))
        return [
            Rewrite(turn, "tool_output", "turn", placeholder=placeholder)
            for turn in view.eligible(self.deletion.keep_last)
        ]

    @classmethod
    def configure(cls, entry: Mapping[str, Any], key: str, context: PolicyContext) -> Deletion:
        check_keys(entry, _KEYS, key, cls.name)
        keep = integer(entry, "keep_last", key, 0)
        placeholder = entry.get("placeholder", DEFAULT_MASK_PLACEHOLDER)
        if not isinstance(placeholder, str) or "{lines}" not in placeholder or "\n" in placeholder:
            raise ConfigError(f"{key}.placeholder: {placeholder!r} must be one line of text containing {{lines}}")
        return cls.named(whole_tool_outputs(cls.name, keep, 100.0, placeholder=placeholder), entry)

    @classmethod
    def canonical_name(cls, deletion: Deletion) -> str:
        return f"mask{deletion.keep_last}"

    @classmethod
    def name_entry(cls, name: str, key: str) -> dict[str, Any] | None:
        first, more, _ = name.partition("-")
        keep = numbered(first, cls.name)
        if keep is False:
            return None
        if more:  # a mask name is one word
            raise ConfigError(f"{key}: {name!r} is not a mask name; expected {cls.name_scheme}")
        return {"policy": cls.name, "keep_last": keep}

    @classmethod
    def label(cls, entry: Mapping[str, Any]) -> str:
        return f"masking, last {entry.get('keep_last')}"
