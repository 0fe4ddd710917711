"""The dataset rows a study needs: SWE-bench Verified (a file or the hub) or the demo tasks.

For ``dataset.kind: swebench`` the rows come from ``dataset.instances``: a local Parquet or
JSONL file in the classic or the swebench-5 schema, or ``hf:NAME`` on the hub
(:mod:`forgetting.instances.dataset_file`). For ``dataset.kind: demo`` they are the demo
tasks' ``instance.json`` files. Either way every row is one
:class:`~forgetting.instances.record.Instance`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from forgetting.demo.tasks import checkout, load_instance
from forgetting.foundation.errors import ResourceError
from forgetting.instances.dataset_file import DatasetSettings, DatasetSource, read_instances
from forgetting.instances.record import (
    CLASSIC,
    DEMO,
    HARNESS_FIELDS,
    LOAD_SWEBENCH5,
    Instance,
    parse_row,
    require,
)
from forgetting.instances.tasks import per_repository, repository_of


class Study(Protocol):
    """What the instances read of a study (:class:`forgetting.study.config.Study` is one): its
    tasks, its root and its ``dataset`` section."""

    @property
    def tasks(self) -> Sequence[str]: ...
    @property
    def root(self) -> Path: ...
    @property
    def raw(self) -> Mapping[str, Any]: ...
    def path(self, value: str | os.PathLike[str]) -> Path: ...
    @property
    def dataset(self) -> DatasetSettings: ...


def instances_path(study: Study) -> Path:
    """``dataset.instances`` as a path (its default by ``dataset.kind`` is the schema's)."""
    return study.dataset.path


def instances_source(study: Study) -> DatasetSource:
    """``dataset.instances``: a file, or ``hf:NAME`` (split ``dataset.split``)."""
    return study.dataset.source(study.root)


def demo_instance(tasks_dir: Path, instance_id: str) -> Instance:
    """A demo task's ``instance.json`` (checked by :func:`forgetting.demo.tasks.load_instance`)."""
    return parse_row(load_instance(tasks_dir, instance_id), source=str(tasks_dir / instance_id / "instance.json"),
                     schema=DEMO)


def demo_problem_statement(tasks_dir: Path, instance_id: str) -> str:
    """A demo task's problem statement, as its ``instance.json`` holds it."""
    return str(load_instance(tasks_dir, instance_id)["problem_statement"])


def check_out_demo_task(tasks_dir: Path, instance_id: str, dest: Path) -> Path:
    """A fresh git checkout of a demo task's base commit at ``dest``
    (:func:`forgetting.demo.tasks.checkout`)."""
    return checkout(tasks_dir, instance_id, dest)


def _no_instance(source: DatasetSource, instance_id: str, more: str = "") -> str:
    return f"{source}: no instance {instance_id!r}{more}; is dataset.instances the SWE-bench Verified file?"


def load_instances(study: Study, ids: Iterable[str] | None = None) -> dict[str, Instance]:
    """The dataset rows of ``ids`` (default: the study's tasks), by instance id.

    A missing file or id is a one-line :class:`ResourceError` naming the file and the id.
    """
    wanted = list(dict.fromkeys(study.tasks if ids is None else ids))
    if study.dataset.kind == "demo":
        path = instances_path(study)
        return {i: demo_instance(path, i) for i in wanted}
    source = instances_source(study)
    rows = read_instances(source, set(wanted))
    missing = [i for i in wanted if i not in rows]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ResourceError(_no_instance(source, missing[0], more))
    return {i: rows[i] for i in wanted}


def load_available(study: Study, ids: Iterable[str]) -> tuple[dict[str, Instance], dict[str, str]]:
    """Like :func:`load_instances`, but an id the dataset lacks (or a demo task that cannot be
    read) does not fail the call: it comes back in the second mapping with its one-line reason,
    so the runs of the other tasks can still be evaluated. A missing or corrupt dataset file is
    still an error for all."""
    wanted = list(dict.fromkeys(ids))
    rows: dict[str, Instance] = {}
    missing: dict[str, str] = {}
    if study.dataset.kind == "demo":
        path = instances_path(study)
        for i in wanted:
            try:
                rows[i] = demo_instance(path, i)
            except ResourceError as exc:
                missing[i] = str(exc)
        return rows, missing
    source = instances_source(study)
    found = read_instances(source, set(wanted))
    for i in wanted:
        if i in found:
            rows[i] = found[i]
        else:
            missing[i] = _no_instance(source, i)
    return rows, missing


@dataclass(frozen=True)
class TaskListCheck:
    """The study's task list against the dataset's rows (``forgetting plan``)."""

    source: str
    rows: int
    tasks: int
    #: repository → tasks of the list in it, most first
    per_repository: dict[str, int]
    schemas: tuple[str, ...]

    def lines(self) -> list[str]:
        repos = ", ".join(f"{repo.split('/', 1)[-1]} {n}" for repo, n in self.per_repository.items())
        schema = " and ".join(self.schemas)
        out = [f"dataset: {self.tasks} of {self.tasks} tasks found in {self.source} ({self.rows} rows, "
               f"{schema} schema): {repos}"]
        if CLASSIC in self.schemas:
            out.append(f"note: classic rows lack {', '.join(HARNESS_FIELDS)}: the agents can run on them and their "
                       f"logs can be graded, the docker and apptainer evaluation cannot use them; {LOAD_SWEBENCH5}")
        return out


def check_task_list(study: Study) -> TaskListCheck | None:
    """Every task of the study is a row of ``dataset.instances`` and has what the task list
    check needs; None when the study's rows are not here yet (a SWE-bench file not fetched)."""
    if study.dataset.kind == "demo":
        return None
    source = instances_source(study)
    if isinstance(source, Path) and not source.exists():
        return None
    everything = read_instances(source)
    missing = [t for t in study.tasks if t not in everything]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ResourceError(f"{source}: the task list's {missing[0]!r}{more} is not among its {len(everything)} rows; "
                            "is dataset.instances the SWE-bench Verified file?")
    rows = {t: everything[t] for t in study.tasks}
    require(rows, "the task list check")
    for task, row in rows.items():
        if row.repo != repository_of(task):
            raise ResourceError(
                f"{row.source} ({task}): repo is {row.repo!r}, but the id names {repository_of(task)!r}"
            )
    return TaskListCheck(
        source=str(source), rows=len(everything), tasks=len(rows),
        per_repository=per_repository(list(rows)),
        schemas=tuple(sorted({r.schema for r in rows.values()})),
    )

