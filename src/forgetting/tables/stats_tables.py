"""What the tables and figures are made of: the statistics (``stats/*.parquet``) as row dicts."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from forgetting.stats.settings import StatsSettings
from forgetting.tables.notes import NoteContext, ci_header


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
    ) -> StatsTables:
        eff = {(r["agent"], r["configuration"], r["metric"]): r for r in effects.to_pylist()}
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
        )

    @property
    def n_tasks(self) -> int:
        if self.study_tasks is not None:
            return self.study_tasks
        return max((int(r["n_tasks"]) for r in self.summary.values()), default=0)

    def ci(self) -> tuple[str, str]:
        """The ``[95 % CI]`` header suffix at the statistics' confidence (Markdown, LaTeX)."""
        return ci_header(self.settings.confidence)

    def effect(self, row: Mapping[str, Any], metric: str) -> dict[str, Any] | None:
        """The effect ``metric`` of the summary row's configuration (None: the statistics have none)."""
        return self.effects.get((row["agent"], row["configuration"], metric))

    def evaluations(self, keep: Callable[[dict[str, Any]], bool] = lambda r: True) -> list[dict[str, Any]]:
        return [self.summary[k] for k in self.summary_order if k[1] != "baseline" and keep(self.summary[k])]

    @property
    def agents(self) -> list[str]:
        """The agents, in the order of the summary."""
        return list(dict.fromkeys(a for a, _ in self.summary_order))

    def agent_rows(self, agent: str) -> list[dict[str, Any]]:
        """The agent's baseline row (when there is one) followed by its evaluations."""
        base = self.baseline(agent)
        return ([base] if base else []) + self.evaluations(lambda r: r["agent"] == agent)

    def with_baselines(self) -> list[dict[str, Any]]:
        """Per agent, its baseline row (when there is one) followed by its evaluations."""
        return [r for agent in self.agents for r in self.agent_rows(agent)]

    def baseline(self, agent: str) -> dict[str, Any] | None:
        return self.summary.get((agent, "baseline"))
