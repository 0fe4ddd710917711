"""The scripted model's knobs (config ``model.scripted``; documented in config/README.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from forgetting.errors import ConfigError


@dataclass(frozen=True)
class ScriptedSettings:
    """Seeded imperfection and limits of the scripted stand-in.

    Per-run draws (``wrong_first_rate``, ``skip_tests_rate``, ``stubborn_rate``) are keyed on
    the run (the ``X-Forgetting-Seed`` header) and the server seed; per-call draws also on
    the call index.
    """

    seed: int = 0
    detour_rate: float = 0.15
    max_detours: int = 2
    wrong_first_rate: float = 0.35
    skip_tests_rate: float = 0.15
    fragment_threshold: float = 0.3
    fragment_error_rate: float = 0.5
    read_attempts: int = 4
    stubborn_rate: float = 0.1
    stubborn_read_attempts: int = 14
    give_up_rate: float = 0.3
    blind_success_rate: float = 0.4
    max_edit_attempts: int = 3
    max_test_runs: int = 3
    reasoning_memory: bool = True
    reasoning_recall_threshold: float = 0.5
    max_reorients: int = 3
    cache_blocks: int = 65536
    cache_per_run: bool = True

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None, source: str = "model.scripted") -> ScriptedSettings:
        """Settings from a config section; unknown keys and bad values are one-line errors."""
        raw = dict(raw or {})
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(raw) - set(known))
        if unknown:
            raise ConfigError(f"{source}.{unknown[0]}: unknown key; allowed keys: {', '.join(sorted(known))}")
        values: dict[str, Any] = {}
        for name, value in raw.items():
            default = known[name].default
            if isinstance(default, bool):
                if not isinstance(value, bool):
                    raise ConfigError(f"{source}.{name}: expected true or false, got {value!r}")
            elif isinstance(default, int):
                if (
                    isinstance(value, bool)
                    or not isinstance(value, int)
                    or value < (0 if name == "seed" else 1)
                ):
                    lowest = 0 if name == "seed" else 1
                    raise ConfigError(f"{source}.{name}: expected an integer ≥ {lowest}, got {value!r}")
            elif isinstance(default, float):
                if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
                    raise ConfigError(
                        f"{source}.{name}: expected a probability between 0 and 1, got {value!r}"
                    )
                value = float(value)
            values[name] = value
        return cls(**values)

    def replace(self, **changes: Any) -> ScriptedSettings:
        merged = {f.name: getattr(self, f.name) for f in fields(self)} | changes
        return ScriptedSettings.from_mapping(merged)
