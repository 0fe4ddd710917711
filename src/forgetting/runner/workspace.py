"""Where an agent works: the task's repository, outside the results directory.

Demo tasks (``dataset.kind: demo``): a fresh git checkout of the task's base commit in the
batch's scratch directory (:func:`forgetting.demo_tasks.checkout`), removed after the run.
SWE-bench tasks (cluster only): the task's instance image (``evaluation.image_dir``,
``<instance_id>.sif``, pulled by the workflow beforehand), where the repository is
``/testbed`` with its environment; the agent's commands run inside it.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from forgetting.errors import UserError
from forgetting.runner.outcome import InfraFailure
from forgetting.runner.settings import RunnerSettings

#: the repository inside a SWE-bench instance image
TESTBED = "/testbed"


@dataclass(frozen=True)
class Workspace:
    """The task's repository: a local directory (demo) or ``/testbed`` inside ``image``."""

    task: str
    path: Path | None = None  # local checkout (demo tasks)
    image: Path | None = None  # SWE-bench instance image (cluster)

    @property
    def local(self) -> bool:
        return self.path is not None

    @property
    def cwd(self) -> str:
        return str(self.path) if self.path is not None else TESTBED

    def remove(self) -> None:
        if self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)


def problem_statement(settings: RunnerSettings, task: str) -> str:
    """The task's issue text, as the agent receives it."""
    if settings.dataset_kind == "demo":
        from forgetting.demo_tasks import load_instance

        return str(load_instance(settings.instances, task)["problem_statement"])
    from forgetting.evaluation.instances import read_jsonl_instances

    rows = read_jsonl_instances(settings.instances, {task})
    if task not in rows:
        raise InfraFailure(f"{settings.instances}: no instance {task!r}")
    return str(rows[task]["problem_statement"])


def make_workspace(settings: RunnerSettings, task: str, scratch: Path) -> Workspace:
    """The task's repository for one run; ``scratch`` is the run's own scratch directory.

    Any failure is an :class:`InfraFailure`: the run is redone, not recorded.
    """
    if settings.dataset_kind == "demo":
        from forgetting.demo_tasks import checkout

        dest = scratch / "repo"
        try:
            return Workspace(task, path=checkout(settings.instances, task, dest))
        except (UserError, OSError) as exc:
            raise InfraFailure(f"workspace: could not check out {task}: {exc}") from None
    from forgetting.evaluation.apptainer import sif_path

    image = sif_path(settings.image_dir, task)
    if not image.is_file():
        raise InfraFailure(
            f"workspace: instance image {image} not found (evaluation.image_dir); pull the images first"
        )
    return Workspace(task, image=image)
