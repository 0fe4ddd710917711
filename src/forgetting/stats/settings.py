"""The ``statistics`` section of a study config, checked and typed.

Every choice SPEC §6 leaves open is a key here (docs/statistics.md explains each):

``baseline_median``
    ``pooled`` (default): the median of a set of baseline runs pools every repeat of every
    (resampled) task; ``task_mean``: the median of the per-task means over repeats.
``refetch_rate``
    ``pooled`` (default): re-fetches / reads summed over the runs of a set;
    ``run_mean``: the mean of the per-run rates (runs without reads left out).
``cost_statistic``
    ``total`` (default): token and cost ratios compare the mean per task (sum over tasks of
    the per-task mean over repeats); ``median``: the median over runs, like turns.
``holm_family``
    ``column`` (default): Holm–Bonferroni over the tests of one column of one table (e.g.
    Table I's Δ tasks solved over all its evaluations); ``table``: over every test of a table.
``missing_runs``
    ``fail`` (default): collection stops and names every planned run without readable output;
    ``mark``: such runs get a ``runs`` row with status ``missing``, and each evaluation is
    compared with its baseline on the tasks both have.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from forgetting.errors import ConfigError

CHOICES: dict[str, tuple[str, ...]] = {
    "baseline_median": ("pooled", "task_mean"),
    "refetch_rate": ("pooled", "run_mean"),
    "cost_statistic": ("total", "median"),
    "holm_family": ("column", "table"),
    "missing_runs": ("fail", "mark"),
}


@dataclass(frozen=True)
class StatsSettings:
    resamples: int = 10_000
    seed: int = 20260402
    confidence: float = 0.95
    baseline_median: str = "pooled"
    refetch_rate: str = "pooled"
    cost_statistic: str = "total"
    holm_family: str = "column"
    missing_runs: str = "fail"

    @property
    def alpha(self) -> float:
        return 1.0 - self.confidence

    @classmethod
    def from_section(cls, section: Mapping[str, Any], source: str = "statistics") -> StatsSettings:
        values: dict[str, Any] = {}
        for key in ("resamples", "seed"):
            if key in section:
                values[key] = int(section[key])
        if "confidence" in section:
            values["confidence"] = float(section["confidence"])
        for key, allowed in CHOICES.items():
            if key in section:
                if section[key] not in allowed:
                    raise ConfigError(
                        f"{source}.{key}: {section[key]!r} is not allowed; "
                        f"allowed values: {', '.join(allowed)}"
                    )
                values[key] = section[key]
        settings = cls(**values)
        if settings.resamples < 1:
            raise ConfigError(f"{source}.resamples: must be at least 1")
        if not 0 < settings.confidence < 1:
            raise ConfigError(f"{source}.confidence: must lie strictly between 0 and 1")
        return settings


def settings_of(study: Any) -> StatsSettings:
    """The statistics settings of a :class:`forgetting.config.Study`."""
    return StatsSettings.from_section(study.section("statistics"), source=f"{study.source}: statistics")
