"""What the tables and figures are made of: the statistics (``stats/*.parquet``) as row dicts."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from forgetting.report.tables.notes import NoteContext
from forgetting.study.statistics import StatsSettings


@dataclass(frozen=True)
class StatsTables:
    """The statistics as row dicts, looked up by (agent, configuration[, metric])."""

    effects: Mapping[tuple[str, str, str], dict[str, Any]]
    summary: Mapping[tuple[str, str], dict[str, Any]]
    summary_order: Sequence[tuple[str, str]]
    comparisons: Sequence[dict[str, Any]]
    settings: StatsSettings
    provenance: str = ""
    context: NoteContext = field(default_factory=NoteContext)
    #: the study's number of tasks (default: the most any summary row has)
    study_tasks: int | None = None
    #: the cache validation rows (``stats/cache_validation.parquet``), by (agent, configuration, profile)
    validation: Mapping[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def from_tables(
        cls,
        effects: pa.Table,
        comparisons: pa.Table,
        summary: pa.Table,
        settings: StatsSettings,
        provenance: str = "",
        context: NoteContext | None = None,
        study_tasks: int | None = None,
        validation: pa.Table | None = None,
    ) -> StatsTables:
        eff = {(r["agent"], r["configuration"], r["metric"]): r for r in effects.to_pylist()}
        checked = validation.to_pylist() if validation is not None else []
        summ_rows = summary.to_pylist()
        return cls(
            effects=eff,
            summary={(r["agent"], r["configuration"]): r for r in summ_rows},
            summary_order=[(r["agent"], r["configuration"]) for r in summ_rows],
            comparisons=comparisons.to_pylist(),
            settings=settings,
            provenance=provenance,
            context=context or NoteContext(),
            study_tasks=study_tasks,
            validation={(r["agent"], r["configuration"], r["profile"]): r for r in checked},
        )

    @property
    def n_tasks(self) -> int:
        if self.study_tasks is not None:
            return self.study_tasks
        return max((int(r["n_tasks"]) for r in self.summary.values()), default=0)

    def effect(self, row: Mapping[str, Any], metric: str) -> dict[str, Any] | None:
        """The effect ``metric`` of the summary row's configuration (None: the statistics have none)."""
        return self.effects.get((row["agent"], row["configuration"], metric))

    def evaluations(self, keep: Callable[[dict[str, Any]], bool] = lambda r: True) -> list[dict[str, Any]]:
        return [self.summary[k] for k in self.summary_order if k[1] != "baseline" and keep(self.summary[k])]

    @property
    def agents(self) -> list[str]:
        """The agents, in the order of the summary."""
        return list(dict.fromkeys(a for a, _ in self.summary_order))

    def with_baselines(self) -> list[dict[str, Any]]:
        """Per agent, its baseline row (when there is one) followed by its evaluations."""
        rows = []
        for agent in self.agents:
            base = self.baseline(agent)
            rows += ([base] if base else []) + self.evaluations(lambda r, a=agent: r["agent"] == a)
        return rows

    def baseline(self, agent: str) -> dict[str, Any] | None:
        return self.summary.get((agent, "baseline"))

    @property
    def profiles(self) -> list[str]:
        """The pricing profiles of the cache validation, in its order."""
        return list(dict.fromkeys(p for _, _, p in self.validation))
