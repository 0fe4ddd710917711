"""The run table: every (agent, configuration, task, repeat) of a study, its seed and batch.

A run is identified by ``{agent}/{configuration}/{task}/{repeat}`` (repeats count from 1).
Its seed is derived from that id and the study seed, so a rerun draws the same deletions.
Runs are grouped into *batches* — the unit of one Snakemake job, and on the cluster of one
GPU job that serves one model to all its runs. A batch holds runs of one agent and one
configuration only, so rerunning a configuration touches that configuration's batches
only. A batch's name carries a hash of its run ids, so a filtered plan (one task, say)
never reuses the name of a batch of the full plan.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from forgetting.foundation.atomic import atomic_path
from forgetting.foundation.seeds import derive_seed, text_hex
from forgetting.foundation.wording import counted
from forgetting.grid import Deletion
from forgetting.records.schemas import PLAN_SCHEMA, write_table
from forgetting.study.config import Study


@dataclass(frozen=True)
class Run:
    agent: str
    deletion: Deletion
    task: str
    repeat: int
    seed: int

    @property
    def configuration(self) -> str:
        return self.deletion.name

    @property
    def run_id(self) -> str:
        return run_id(self.agent, self.deletion.name, self.task, self.repeat)

    def identity(self) -> dict[str, Any]:
        """The run's identity columns (:data:`forgetting.records.schemas.RUN_IDENTITY`)."""
        return {"run_id": self.run_id, "agent": self.agent, "configuration": self.deletion.name, "task": self.task,
                "repeat": self.repeat, "seed": self.seed, **self.deletion.columns()}


def run_id(agent: str, configuration: str, task: str, repeat: int) -> str:
    return f"{agent}/{configuration}/{task}/{repeat}"


def parse_run_id(value: str) -> tuple[str, str, str, int]:
    """``agent/configuration/task/repeat`` → its four parts (ValueError if malformed)."""
    parts = value.strip("/").split("/")
    if len(parts) != 4 or not parts[3].isdigit():
        raise ValueError(f"{value!r} is not a run id (agent/configuration/task/repeat)")
    return parts[0], parts[1], parts[2], int(parts[3])


def repeats_of(study: Study, deletion: Deletion) -> int:
    return study.baseline_repeats if deletion.is_baseline else study.deletion_repeats


def plan_runs(study: Study) -> list[Run]:
    """Every run of the study, ordered by agent, configuration, task, repeat."""
    runs = []
    for agent in study.agents:
        for deletion in study.configurations:
            for task in study.tasks:
                for repeat in range(1, repeats_of(study, deletion) + 1):
                    rid = run_id(agent, deletion.name, task, repeat)
                    runs.append(Run(agent, deletion, task, repeat, derive_seed(study.seed, rid)))
    return runs


@dataclass(frozen=True)
class Batch:
    agent: str
    configuration: str
    name: str
    runs: tuple[Run, ...]

    @property
    def key(self) -> str:
        """``{agent}/{configuration}/{name}``: the batch's place under results/batches/."""
        return f"{self.agent}/{self.configuration}/{self.name}"


def _chunks(seq: Sequence[Run], size: int) -> Iterator[Sequence[Run]]:
    for i in range(0, len(seq), size):
        yield seq[i : i + size]


def batch_name(runs: Iterable[Run], index: int) -> str:
    digest = text_hex("\n".join(r.run_id for r in runs))[:8]
    return f"b{index:03d}-{digest}"


#: the ``configuration`` place of a batch packed across configurations (``only_tasks``)
PACKED = "only-tasks"


def plan_batches(study: Study, runs: Sequence[Run] | None = None) -> list[Batch]:
    """Runs grouped by (agent, configuration) into chunks of ``execution.batch_size``.

    A study narrowed to some tasks (``only_tasks``) packs each agent's runs across its
    configurations instead, under ``{agent}/only-tasks/``: one task's 47 runs per agent are
    one batch job, not 47 (each run keeps its own configuration and seed, and writes the run
    directory the full study's batches then find finished)."""
    size = int(study.plan.batch_size)
    runs = plan_runs(study) if runs is None else runs
    packed = bool(study.raw.get("only_tasks"))
    groups: dict[tuple[str, str], list[Run]] = {}
    for r in runs:
        groups.setdefault((r.agent, PACKED if packed else r.configuration), []).append(r)
    batches = []
    for (agent, conf), members in groups.items():
        for index, chunk in enumerate(_chunks(members, size)):
            batches.append(Batch(agent, conf, batch_name(chunk, index), tuple(chunk)))
    return batches


@dataclass(frozen=True)
class PlanSummary:
    runs: int
    configurations: int
    evaluations: int
    agents: int
    tasks: int
    batches: int

    def line(self) -> str:
        return " · ".join((
            counted(self.runs, "run"), counted(self.configurations, "configuration"),
            counted(self.evaluations, "evaluation"), counted(self.agents, "agent"), counted(self.tasks, "task"),
            counted(self.batches, "batch", "batches"),
        ))


def summarize(study: Study, runs: Sequence[Run] | None = None) -> PlanSummary:
    runs = plan_runs(study) if runs is None else runs
    n_conf = len(study.deletion_configurations)
    return PlanSummary(
        runs=len(runs),
        configurations=n_conf,
        evaluations=n_conf * len(study.agents),
        agents=len(study.agents),
        tasks=len(study.tasks),
        batches=len(plan_batches(study, runs)),
    )


def write_run_table(study: Study, path: str | Path) -> None:
    """The run table as Parquet (schema :data:`forgetting.records.schemas.PLAN_SCHEMA`), written atomically."""
    runs = plan_runs(study)
    batch_of = {r.run_id: b.key for b in plan_batches(study, runs) for r in b.runs}
    rows = [{**r.identity(), "batch": batch_of[r.run_id]} for r in runs]
    table = pa.Table.from_pylist(rows, schema=PLAN_SCHEMA)
    with atomic_path(path) as tmp:
        write_table(table, tmp)
