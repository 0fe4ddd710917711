"""Settings of the deletion engine that are not part of a configuration's identity
(config section ``deletion``): the placeholder texts and how token-level draws are made.

Their defaults are the schema's (``deletion`` in workflow/schemas/config.schema.yaml):
:meth:`DeletionSettings.from_config` fills what a section leaves out, so
``DeletionSettings.from_config(None)`` is the settings of a study that gives none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from forgetting.deletion.tokens import TOKEN_DRAWS
from forgetting.foundation import config_schema
from forgetting.foundation.errors import ConfigError

#: the schema's placeholder texts (``deletion.placeholders``), by the part they stand in for
DEFAULT_PLACEHOLDERS: Mapping[str, str] = config_schema.defaults("deletion")["placeholders"]
PLACEHOLDER_PARTS: tuple[str, ...] = tuple(DEFAULT_PLACEHOLDERS)


@dataclass(frozen=True)
class DeletionSettings:
    placeholders: Mapping[str, str]
    token_draw: str

    def __post_init__(self) -> None:
        if self.token_draw not in TOKEN_DRAWS:
            raise ConfigError(f"deletion.token_draw: {self.token_draw!r} is not allowed; allowed values: "
                              f"{', '.join(TOKEN_DRAWS)}")
        if sorted(self.placeholders) != sorted(PLACEHOLDER_PARTS):
            raise ConfigError(f"deletion.placeholders: expected a text for each of {', '.join(PLACEHOLDER_PARTS)}")
        for part, text in self.placeholders.items():
            if not isinstance(text, str) or not text.strip():
                raise ConfigError(f"deletion.placeholders.{part}: must be a non-empty text")
        object.__setattr__(self, "placeholders", dict(self.placeholders))

    @classmethod
    def from_config(cls, section: Mapping[str, Any] | None = None, *, source: str | None = None) -> DeletionSettings:
        """From a study's ``deletion`` section (``study.section("deletion")``), or part of one
        (checked against the schema, its defaults filled)."""
        s = config_schema.section("deletion", section, source=source)
        return cls(placeholders=dict(s["placeholders"]), token_draw=str(s["token_draw"]))

    def as_dict(self) -> dict[str, Any]:
        return {"placeholders": dict(sorted(self.placeholders.items())), "token_draw": self.token_draw}
