"""Where an agent works: the task's repository, outside the results directory.

Demo tasks (``dataset.kind: demo``): a fresh git checkout of the task's base commit
(:func:`forgetting.instances.load.check_out_demo_task`), removed after the run. Its path depends only on
the scratch directory and the run id (``<scratch_dir>/forgetting-workspaces/<hash>/repo``),
never on a process id, a random name, the study's results directory or where the project is
checked out: paths show up in tool output (tracebacks), and the demo must give byte-identical
results when run twice, from any checkout, directly or through an endpoint.

So two studies on one machine sharing a scratch directory (two clones, a study and its
endpoint variant) want the same workspace for a run of the same id. A run holds an exclusive
lock on its workspace (``<hash>.lock`` beside it: ``flock``, released when the run's process
ends however it ends) from before the workspace is made until it is removed; a second run of
that id waits for it — saying so in its log, naming the holder — and never removes a
workspace another run is working in. A run that waits longer than a run may take
(``execution.run_timeout_s`` and a minute) is an infrastructure failure naming the lock: the
run is redone later.
SWE-bench tasks (cluster only): the task's instance image (``evaluation.image_dir``,
``<instance_id>.sif``, pulled by the workflow beforehand), where the repository is
``/testbed`` with its environment; the agent's commands run inside it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from forgetting.foundation.errors import ResourceError, UserError
from forgetting.foundation.seeds import text_hex
from forgetting.instances.dataset_file import read_instances
from forgetting.instances.images import sif_path
from forgetting.instances.load import check_out_demo_task, demo_problem_statement
from forgetting.instances.record import require
from forgetting.run.outcome import InfraFailure
from forgetting.study.runner import RunnerSettings

#: the repository inside a SWE-bench instance image
TESTBED = "/testbed"


@dataclass(frozen=True)
class Workspace:
    """The task's repository: a local directory (demo) or ``/testbed`` inside ``image``."""

    task: str
    path: Path | None = None  # local checkout (demo tasks)
    image: Path | None = None  # SWE-bench instance image (cluster)
    #: the open lock file of a local checkout (held until :meth:`remove`)
    lock: int | None = field(default=None, compare=False, repr=False)

    @property
    def local(self) -> bool:
        return self.path is not None

    @property
    def cwd(self) -> str:
        return str(self.path) if self.path is not None else TESTBED

    def remove(self) -> None:
        """Remove the checkout, then let go of its lock (a waiting run of the same id goes on)."""
        if self.path is not None:
            shutil.rmtree(self.path.parent, ignore_errors=True)
        if self.lock is not None:
            with contextlib.suppress(OSError):
                os.close(self.lock)
            object.__setattr__(self, "lock", None)


def problem_statement(settings: RunnerSettings, task: str) -> str:
    """The task's issue text, as the agent receives it: the row's ``problem_statement``
    exactly, as SWE-bench's own runners hand it over — mini-swe-agent's
    ``run/benchmarks/swebench.py`` passes ``instance["problem_statement"]`` to
    ``agent.run`` (the ``{{task}}`` of its ``instance_template``); Trae's
    ``evaluation/utils.py`` writes it unchanged to the file ``trae-cli run --file`` reads.
    Nothing is stripped or re-encoded (many rows end in a newline, half of them carry the
    issue's ``\\r\\n``)."""
    if settings.dataset_kind == "demo":
        return demo_problem_statement(settings.instances, task)
    rows = read_instances(settings.instances, {task})
    if task not in rows:
        raise InfraFailure(f"{settings.instances}: no instance {task!r}")
    require({task: rows[task]}, "the agent run")
    return str(rows[task].problem_statement)


def check_task_rows(settings: RunnerSettings, tasks: set[str]) -> None:
    """Before a batch starts its model server: every task's row is in ``dataset.instances``
    and has a problem statement (one :class:`~forgetting.foundation.errors.ResourceError` line naming
    the file, the row and the field otherwise). Demo tasks are read by each run."""
    if settings.dataset_kind == "demo" or not tasks:
        return
    rows = read_instances(settings.instances, tasks)
    missing = sorted(tasks - set(rows))
    if missing:
        raise ResourceError(f"{settings.instances}: no instance {missing[0]!r}; is dataset.instances the "
                            "SWE-bench Verified file?")
    require(rows, "the agent run")


#: the time stamp of every file of a fresh demo checkout (2026-01-01T00:00:00Z)
DEMO_EPOCH = 1767225600


def freeze_times(repo: Path, timestamp: float) -> None:
    """Give every file and directory of ``repo`` (and its parent) the same time stamp, so
    that ``ls -l`` in a fresh checkout prints the same on any day and machine."""
    for root, dirs, files in os.walk(repo):
        for name in [*dirs, *files]:
            os.utime(os.path.join(root, name), (timestamp, timestamp), follow_symlinks=False)
    for path in (repo, repo.parent):
        os.utime(path, (timestamp, timestamp))


def workspace_dir(settings: RunnerSettings, run_id: str) -> Path:
    """The run's own, reproducible workspace directory for a demo task."""
    key = text_hex(run_id)[:16]
    return settings.scratch_dir / "forgetting-workspaces" / key / "repo"


def lock_workspace(dest: Path, run_id: str, *, wait_s: float, say: Callable[[str], None] = print,
                   poll_s: float = 0.5) -> int:
    """Take the exclusive lock of the workspace ``dest`` (``<hash>.lock`` beside its folder);
    wait while another run holds it, at most ``wait_s``. Returns the open lock file."""
    root = dest.parent.parent
    root.mkdir(parents=True, exist_ok=True)
    lock_path = root / f"{dest.parent.name}.lock"
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    deadline = time.monotonic() + wait_s
    told = False
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip() or "another process"
                if time.monotonic() >= deadline:
                    raise InfraFailure(
                        f"workspace {dest}: still in use by {holder} after {wait_s:g} s (lock {lock_path}); "
                        "another study sharing execution.scratch_dir runs this run id: give each study its own "
                        "execution.scratch_dir, or let the other finish") from None
                if not told:
                    say(f"workspace {dest}: in use by {holder}; waiting for it (lock {lock_path})")
                    told = True
                time.sleep(poll_s)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"run {run_id} (pid {os.getpid()})\n".encode(), 0)
        return fd
    except BaseException:
        os.close(fd)
        raise


def make_workspace(settings: RunnerSettings, task: str, run_id: str, *,
                   say: Callable[[str], None] = lambda m: print(m, flush=True)) -> Workspace:
    """The task's repository for one run (a demo task's: locked, see the module docstring).

    Any failure is an :class:`InfraFailure`: the run is redone, not recorded.
    """
    if settings.dataset_kind == "demo":
        dest = workspace_dir(settings, run_id)
        try:
            lock = lock_workspace(dest, run_id, wait_s=settings.run_timeout_s + 60.0, say=say)
        except OSError as exc:
            raise InfraFailure(f"workspace: could not lock {dest}: {exc}") from None
        shutil.rmtree(dest.parent, ignore_errors=True)  # left behind by a killed attempt (no one holds it)
        try:
            path = check_out_demo_task(settings.instances, task, dest)
            freeze_times(path, DEMO_EPOCH)
            return Workspace(task, path=path, lock=lock)
        except (UserError, OSError) as exc:
            os.close(lock)
            raise InfraFailure(f"workspace: could not check out {task}: {exc}") from None
    image = sif_path(settings.image_dir, task)
    if not image.is_file():
        raise InfraFailure(
            f"workspace: instance image {image} not found (evaluation.image_dir); pull the images first"
        )
    return Workspace(task, image=image)
