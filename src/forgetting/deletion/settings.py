"""Settings of the deletion engine that are not part of a configuration's identity
(config section ``deletion``): the placeholder texts and how token-level draws are made."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from forgetting.deletion.tokens import TOKEN_DRAWS
from forgetting.errors import ConfigError

#: the schema's defaults (workflow/schemas/config.schema.yaml, ``deletion.placeholders``)
DEFAULT_PLACEHOLDERS: Mapping[str, str] = {
    "reasoning": "[reasoning deleted]",
    "tool_output": "[tool output deleted]",
}


@dataclass(frozen=True)
class DeletionSettings:
    placeholders: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_PLACEHOLDERS))
    token_draw: str = "exact"

    def __post_init__(self) -> None:
        if self.token_draw not in TOKEN_DRAWS:
            raise ConfigError(f"deletion.token_draw: {self.token_draw!r} is not allowed; allowed values: "
                              f"{', '.join(TOKEN_DRAWS)}")
        merged = {**DEFAULT_PLACEHOLDERS, **dict(self.placeholders)}
        for part, text in merged.items():
            if part not in DEFAULT_PLACEHOLDERS:
                raise ConfigError(
                    f"deletion.placeholders.{part}: unknown part; allowed: reasoning, tool_output"
                )
            if not isinstance(text, str) or not text.strip():
                raise ConfigError(f"deletion.placeholders.{part}: must be a non-empty text")
        object.__setattr__(self, "placeholders", merged)

    @classmethod
    def from_config(cls, section: Mapping[str, Any] | None) -> DeletionSettings:
        """From a study's ``deletion`` section (``study.section("deletion")``)."""
        section = section or {}
        return cls(placeholders=dict(section.get("placeholders") or {}),
                   token_draw=str(section.get("token_draw", "exact")))

    def as_dict(self) -> dict[str, Any]:
        return {"placeholders": dict(sorted(self.placeholders.items())), "token_draw": self.token_draw}
