"""The scripted model's knobs (config ``model.scripted``: the schema states each key's type, bounds,
default and meaning; config/README.md lists them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from forgetting.foundation import config_schema
from forgetting.foundation.errors import ConfigError

#: the config section these settings are
SECTION = "model.scripted"


def _check(value: Any, spec: Mapping[str, Any], key: str) -> None:
    """``value`` against the schema of its key, with a message in the model's own words."""
    kind = spec["type"]
    if kind == "boolean":
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true or false, got {value!r}")
    elif kind == "integer":
        lowest = spec.get("minimum", 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < lowest:
            raise ConfigError(f"{key}: expected an integer ≥ {lowest}, got {value!r}")
    elif kind == "number":
        low, high = spec.get("minimum", 0), spec.get("maximum", 1)
        if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
            raise ConfigError(f"{key}: expected a probability between {low} and {high}, got {value!r}")


@dataclass(frozen=True)
class ScriptedSettings:
    """Seeded imperfection and limits of the scripted stand-in.

    Per-run draws (``wrong_first_rate``, ``skip_tests_rate``, ``stubborn_rate``) are keyed on
    the run (the ``X-Forgetting-Seed`` header) and the server seed; per-call draws also on
    the call index.
    """

    seed: int
    detour_rate: float
    max_detours: int
    wrong_first_rate: float
    skip_tests_rate: float
    fragment_threshold: float
    fragment_error_rate: float
    read_attempts: int
    stubborn_rate: float
    stubborn_read_attempts: int
    give_up_rate: float
    blind_success_rate: float
    max_edit_attempts: int
    max_test_runs: int
    reasoning_memory: bool
    reasoning_recall_threshold: float
    max_reorients: int
    cache_blocks: int
    cache_per_run: bool

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None = None, source: str = "model.scripted") -> ScriptedSettings:
        """Settings from a config section (or part of one; None: the schema's defaults); unknown
        keys and bad values are one-line errors. Types, bounds and defaults are the schema's
        (``model.scripted``)."""
        raw = dict(raw or {})
        props = config_schema.schema_at(SECTION)["properties"]
        unknown = sorted(set(raw) - set(props))
        if unknown:
            raise ConfigError(f"{source}.{unknown[0]}: unknown key; allowed keys: {', '.join(sorted(props))}")
        for name, value in raw.items():
            _check(value, props[name], f"{source}.{name}")
        values = config_schema.section(SECTION, raw)
        return cls(**{k: float(v) if props[k]["type"] == "number" else v for k, v in values.items()})

    def replace(self, **changes: Any) -> ScriptedSettings:
        merged = {f.name: getattr(self, f.name) for f in fields(self)} | changes
        return ScriptedSettings.from_mapping(merged)
