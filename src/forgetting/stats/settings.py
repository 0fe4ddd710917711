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

and one of the ``evaluation`` section, read here because only the statistics act on it:

``evaluation.on_error``
    what a run whose evaluation errored (``eval_status`` ``timeout`` or ``error``) counts as:
    ``fail`` (default): the statistics stop, naming the runs and the command that redoes just
    their evaluation; ``exclude``: its task is left out of both sides (the configuration and
    the baseline) of every comparison of that evaluation (agent × configuration; for a
    baseline run, of every evaluation of its agent); ``unresolved``: it counts as not solved.
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
#: ``evaluation.on_error``
ON_ERROR: tuple[str, ...] = ("fail", "exclude", "unresolved")
#: the settings each stage reads (``missing_runs`` is collection's)
STATS_STAGE: tuple[str, ...] = (
    "resamples", "seed", "confidence", "baseline_median", "refetch_rate", "cost_statistic", "on_error",
)
TABLES_STAGE: tuple[str, ...] = ("holm_family",)


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
    on_error: str = "fail"  # evaluation.on_error

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
    def from_section(
        cls, section: Mapping[str, Any], source: str = "statistics", *, on_error: str = "fail"
    ) -> StatsSettings:
        if on_error not in ON_ERROR:
            raise ConfigError(
                f"evaluation.on_error: {on_error!r} is not allowed; "
                f"allowed values: {', '.join(ON_ERROR)}"
            )
        values: dict[str, Any] = {"on_error": on_error}
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
    return StatsSettings.from_section(
        study.section("statistics"),
        source=f"{study.source}: statistics",
        on_error=str(study.section("evaluation").get("on_error", "fail")),
    )
