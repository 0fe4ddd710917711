"""Settings of the deletion engine that are not part of a configuration's identity
(config section ``deletion``): the placeholder texts and how token-level draws are made.

Their defaults are the schema's (``deletion`` in workflow/schemas/config.schema.yaml):
:meth:`DeletionSettings.from_section` fills what a section leaves out (a loaded study holds its
own, ``study.deletion``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from forgetting.deletion.tokens import TOKEN_DRAWS
from forgetting.foundation import config_schema
from forgetting.foundation.errors import ConfigError

#: the schema's placeholder texts (``deletion.placeholders``), by the part they stand in for
DEFAULT_PLACEHOLDERS: Mapping[str, str] = config_schema.defaults("deletion")["placeholders"]
PLACEHOLDER_PARTS: tuple[str, ...] = tuple(DEFAULT_PLACEHOLDERS)


@dataclass(frozen=True)
class DeletionSettings(config_schema.Section):
    PATH: ClassVar[str] = "deletion"
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
    def from_filled(cls, values: Mapping[str, Any], **context: Any) -> DeletionSettings:
        """From a checked ``deletion`` section."""
        return cls(placeholders=dict(values["placeholders"]), token_draw=str(values["token_draw"]))

    def as_dict(self) -> dict[str, Any]:
        return {"placeholders": dict(sorted(self.placeholders.items())), "token_draw": self.token_draw}
