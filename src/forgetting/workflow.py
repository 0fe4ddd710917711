"""Glue between the Snakefile and the package: the study, its batches and their paths.

The Snakefile calls :func:`load` once; rules then name their outputs with the helpers
below, so the DAG is built from the same plan code as ``forgetting plan``.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from forgetting.cluster.containers import check_paths
from forgetting.foundation.atomic import is_disk_full
from forgetting.foundation.config_schema import error_line, first_error, load_schema
from forgetting.foundation.errors import ConfigError, UserError
from forgetting.foundation.layout import EVAL_JSON, RUN_JSON, Layout
from forgetting.foundation.snakemake_lock import SNAKEMAKE_LOCKS, hold_study_lock
from forgetting.foundation.stagelog import stop_line
from forgetting.records import is_finished
from forgetting.study.config import Study, read_yaml, study_from_mapping
from forgetting.study.plan import Batch, Run, plan_batches, plan_runs


@dataclass(frozen=True)
class WorkflowPlan:
    study: Study
    layout: Layout
    batches: tuple[Batch, ...]
    by_key: Mapping[str, Batch]

    @property
    def results(self) -> str:
        return str(self.layout.results)

    @property
    def is_subset(self) -> bool:
        """True when --config only/only_agents/only_tasks narrowed the study."""
        raw = self.study.raw
        return any(raw.get(k) for k in ("only", "only_agents", "only_tasks"))

    @property
    def regenerate(self) -> bool:
        return bool(self.study.raw["regenerate"])

    def batch(self, agent: str, configuration: str, name: str) -> Batch:
        return self.by_key[f"{agent}/{configuration}/{name}"]

    def batch_files(self, pattern: str) -> list[str]:
        """``pattern`` (with {agent}, {configuration}, {batch}) for every batch."""
        return [
            pattern.format(agent=b.agent, configuration=b.configuration, batch=b.name) for b in self.batches
        ]


#: top-level boolean keys a user sets with ``--config KEY=true``
COMMAND_LINE_FLAGS: tuple[str, ...] = ("regenerate", "force_rerun")


def normalize_flags(config: Any) -> None:
    """Turn ``--config regenerate=true`` (Snakemake keeps ``true``/``false`` as strings; only
    ``True``/``False`` become booleans) into booleans, in place, before schema validation."""
    for key in COMMAND_LINE_FLAGS:
        value = config.get(key) if hasattr(config, "get") else None
        if isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no", "1", "0"):
            config[key] = value.strip().lower() in ("true", "yes", "1")


def check_sources(
    config: Mapping[str, Any], configfiles: Sequence[str | Path] = (), overrides: Mapping[str, Any] | None = None
) -> None:
    """What Snakemake's own reading hides, as one :class:`ConfigError` line: a config file that
    names a key twice (Snakemake keeps the last; each file is read again through
    :func:`forgetting.study.config.read_yaml`), and a bad key or value given with ``--config``
    (``overrides``), blamed on ``--config`` rather than on the config file."""
    for path in configfiles:
        read_yaml(path)
    overrides = overrides or {}
    allowed = load_schema().get("properties") or {}
    for key in overrides:
        if key not in allowed:
            raise ConfigError(f"--config {key}: not a key of the config; allowed keys: {', '.join(sorted(allowed))}")
    error = first_error(config)
    if error is not None and error.absolute_path and error.absolute_path[0] in overrides:
        raise ConfigError(f"--config {error_line(error)}")


def load(
    config: Mapping[str, Any], root: str | Path = ".", source: str = "config", *,
    configfiles: Sequence[str | Path] = (), overrides: Mapping[str, Any] | None = None,
) -> WorkflowPlan:
    """The study of a Snakemake ``config``; a bad config exits with one line, status 2.

    Boolean flags given on the command line as strings are normalised in ``config`` itself
    (see :func:`normalize_flags`), so the Snakefile's schema validation and the rules see booleans.
    ``configfiles`` and ``overrides`` (Snakemake's ``--config``) are checked by :func:`check_sources`.
    """
    normalize_flags(config)
    try:
        check_sources(config, configfiles, overrides)
        study = study_from_mapping(config, source=source, root=Path(root).resolve())
        check_paths(study)  # image paths name their unset $VARIABLES here
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    runs = plan_runs(study)
    if study.raw["regenerate"]:
        try:
            check_cached_runs(study, runs)
        except UserError as exc:
            print(f"error: {exc}", file=sys.stderr, flush=True)
            raise SystemExit(2) from None
    batches = tuple(plan_batches(study, runs))
    rel = Path(study.plan.results_dir)
    return WorkflowPlan(study, Layout(rel), batches, {b.key: b for b in batches})


def hold_lock(plan: WorkflowPlan, workdir: str | Path = ".") -> None:
    """The study's lock for this Snakemake (its main process, not a dry run:
    :func:`forgetting.foundation.snakemake_lock.hold_study_lock`): another one running the study
    is one line and status 2; a lock left by a killed one is removed, and said so."""
    try:
        removed = hold_study_lock(plan.layout.results, workdir)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    if removed:
        print(f"removed the Snakemake lock a killed workflow of this study left ({', '.join(p.name for p in removed)} "
              f"in {SNAKEMAKE_LOCKS}/): no other Snakemake of it is running", file=sys.stderr, flush=True)


#: what Snakemake itself puts before every job's command run with bash (snakemake/shell.py)
SNAKEMAKE_PREFIX = "set -euo pipefail; "
#: the command that starts a job's Python with Ctrl-C held (GNU coreutils 8.31 and later)
HOLD_INT = "env --block-signal=INT"


def job_shell_prefix(local: bool) -> str:
    """The Snakefile's ``shell.prefix``: Snakemake's own, then — for the jobs this Snakemake runs
    on this machine (``local``), where a terminal's Ctrl-C reaches every job — the job's command
    started with SIGINT held (blocked) where ``env`` can.

    A ``script:`` job first runs Snakemake's own preamble (it imports ``snakemake``: a second or
    more); a Ctrl-C there printed Python's KeyboardInterrupt traceback before any of our code ran.
    Held, the signal waits: ``workflow/scripts/_checkout.py``, the first import of every rule
    script, releases it once it can say "interrupted (SIGINT)" in one line, and a Ctrl-C that came
    meanwhile takes effect there (it is not lost: Snakemake waits for its jobs to stop). Jobs on
    cluster nodes (Snakemake re-reading this file there) get Snakemake's prefix alone: no terminal
    reaches them, and their ``env`` may be older."""
    if local and _env_holds_signals():
        return f"{SNAKEMAKE_PREFIX}{HOLD_INT} "
    return SNAKEMAKE_PREFIX


@functools.cache
def _env_holds_signals() -> bool:
    try:
        done = subprocess.run([*HOLD_INT.split(), "true"], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def check_cached_runs(study: Study, runs: Sequence[Run]) -> None:
    """``regenerate=true`` works from the run directories on disk, with no agent, model or
    evaluation job: before any job, every planned run must be there, finished (``run.json``)
    and evaluated (``eval.json``). None there at all is always an error (a study of nothing);
    some missing is one under ``statistics.missing_runs: fail`` (the default) and is left to
    collection to mark under ``mark``. The error names the count, the first run and what to
    do: where a replication package goes, or the plain invocation that makes what is missing."""
    layout = Layout(study.results_dir)
    unrun: list[str] = []
    unevaluated: list[str] = []
    for run in runs:
        run_dir = layout.run_dir(run.run_id)
        if not is_finished(run_dir):
            unrun.append(run.run_id)
        elif not (run_dir / EVAL_JSON).is_file():
            unevaluated.append(run.run_id)
    where = _shown(layout.results / "runs")
    package = "AGENT/CONFIGURATION/TASK/REPEAT/, each with its run.json and eval.json"
    if runs and len(unrun) == len(runs):
        raise UserError(
            f"regenerate=true: none of the {len(runs)} planned runs has outputs in {where}/ (first expected: "
            f"{where / runs[0].run_id / RUN_JSON}); put a replication package's run directories there "
            f"({package}), or run without regenerate=true to make them"
        )
    if study.statistics.missing_runs != "fail" or not (unrun or unevaluated):
        return
    problems = []
    if unrun:
        problems.append(f"{len(unrun)} have no run record (first: {where / unrun[0] / RUN_JSON})")
    if unevaluated:
        problems.append(f"{len(unevaluated)} have no evaluation (first: {where / unevaluated[0] / EVAL_JSON})")
    raise UserError(
        f"regenerate=true: of the {len(runs)} planned runs, {' and '.join(problems)}; run without "
        "regenerate=true to make what is missing (finished runs and current evaluations are kept), put the "
        f"missing run directories in {where}/ ({package}), or set statistics.missing_runs: mark"
    )


def _shown(path: Path) -> Path:
    """``path`` relative to the working directory where it lies below it (shorter errors)."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return path


def study_of(smk: Any) -> Study:
    """The study inside a ``script:`` job (``smk`` is the ``snakemake`` object)."""
    return study_from_mapping(smk.config, source="config", root=Path.cwd())


def batch_of(study: Study, wildcards: Any) -> Batch:
    """The batch a job's wildcards name (KeyError if the plan has no such batch)."""
    key = f"{wildcards.agent}/{wildcards.configuration}/{wildcards.batch}"
    for b in plan_batches(study):
        if b.key == key:
            return b
    raise KeyError(f"batch {key} is not part of this study's plan")


@contextlib.contextmanager
def job(smk: Any) -> Iterator[None]:
    """The body of a rule's ``script:`` (every ``workflow/scripts/*.py`` runs in one): a
    :class:`~forgetting.foundation.errors.UserError`, or a full disk
    (:func:`forgetting.foundation.atomic.is_disk_full`), ends the job with its one line
    ``error: …`` on stderr and in the rule's log, and exit status 2 — no traceback. Any other
    exception is a bug and keeps its traceback. Ctrl-C (SIGINT, which a terminal sends the whole
    process group, so every job gets it) ends the job with one line saying so and status 130, no
    traceback; SIGTERM (Snakemake or Slurm cancelling the job, ``kill`` of the group) likewise
    with status 143 — raised as ``SystemExit(143)`` where it lands, so every atomic write under
    way removes its temporary file (the default action would end the process at once and leave
    it beside its target)."""
    _terminate_as_exit()
    try:
        yield
    except UserError as exc:
        _stop(smk, f"error: {exc}", exc.exit_code)
    except KeyboardInterrupt:
        _stop(smk, stop_line(KeyboardInterrupt()), 130)
    except SystemExit as exc:
        if exc.code != TERMINATED:
            raise
        _stop(smk, stop_line(exc), TERMINATED)
    except OSError as exc:
        if not is_disk_full(exc):
            raise
        _stop(smk, f"error: {exc.filename}: {exc.strerror}", 2)


#: a job's exit status after SIGTERM (128 + 15, as a shell reports a process it ended)
TERMINATED = 128 + signal.SIGTERM


def _exit_on_term(signum: int, frame: Any) -> None:
    raise SystemExit(TERMINATED)


def _terminate_as_exit() -> None:
    """SIGTERM as ``SystemExit(143)`` from now on (a job ends with its body), unless it is
    ignored or this is not the main thread (only it can set a handler)."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) != signal.SIG_IGN:
        signal.signal(signal.SIGTERM, _exit_on_term)


def _stop(smk: Any, line: str, code: int) -> NoReturn:
    for log in list(getattr(smk, "log", None) or []):
        _append_once(Path(str(log)), line)
    print(line, file=sys.stderr, flush=True)
    raise SystemExit(code) from None


def _append_once(path: Path, line: str) -> None:
    """Append ``line`` to the log at ``path`` unless its last line already is it (a stage's
    own :class:`~forgetting.foundation.stagelog.StageLog` writes the error line it stops on)."""
    with contextlib.suppress(OSError):
        last = path.read_text(encoding="utf-8", errors="replace").rstrip("\n").rsplit("\n", 1)[-1]
        if last == line:
            return
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
