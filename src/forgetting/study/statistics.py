"""The ``statistics`` section of a study config (and ``evaluation.on_error``), checked and typed.

Every choice SPEC §6 leaves open is a key of ``statistics``; the schema states each key's
allowed values, default and meaning (config/README.md lists them, docs/statistics.md explains
them). ``evaluation.on_error`` is read here because only the statistics act on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from forgetting.foundation import config_schema

#: the settings each stage reads (``missing_runs`` is collection's)
STATS_STAGE: tuple[str, ...] = (
    "resamples", "seed", "confidence", "baseline_median", "refetch_rate", "cost_statistic", "on_error",
)
TABLES_STAGE: tuple[str, ...] = ("holm_family", "min_paired_tasks")


@dataclass(frozen=True)
class StatsSettings(config_schema.Section):
    resamples: int
    seed: int
    confidence: float
    baseline_median: str
    refetch_rate: str
    cost_statistic: str
    holm_family: str
    missing_runs: str
    on_error: str  # evaluation.on_error
    #: the fewest paired tasks on which a table marks a result significant (0: always)
    min_paired_tasks: int
    PATH: ClassVar[str] = "statistics"

    @property
    def alpha(self) -> float:
        return 1.0 - self.confidence

    def computed_with(self) -> dict[str, Any]:
        """The settings the ``stats`` stage computes with (recorded in its outputs, so the
        tables can tell statistics of other settings from current ones)."""
        return {key: getattr(self, key) for key in STATS_STAGE}

    def tables_with(self) -> dict[str, Any]:
        """The settings the ``tables`` stage applies on top of the statistics."""
        return {key: getattr(self, key) for key in TABLES_STAGE}

    @classmethod
    def from_filled(cls, values: Mapping[str, Any], *, on_error: str | None = None) -> StatsSettings:
        """From a checked ``statistics`` section and ``evaluation.on_error`` (None: the schema's
        default, for a section handed in apart from a study)."""
        s = values
        return cls(
            resamples=int(s["resamples"]), seed=int(s["seed"]), confidence=float(s["confidence"]),
            baseline_median=str(s["baseline_median"]), refetch_rate=str(s["refetch_rate"]),
            cost_statistic=str(s["cost_statistic"]), holm_family=str(s["holm_family"]),
            missing_runs=str(s["missing_runs"]), on_error=str(on_error if on_error is not None else
                         config_schema.schema_at("evaluation.on_error")["default"]),
            min_paired_tasks=int(s["min_paired_tasks"]),
        )

