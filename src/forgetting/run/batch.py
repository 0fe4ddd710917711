"""A batch of runs against one model server: the workflow's ``run_batch`` job.

0. The batch takes its own lock (:func:`batch_lock`): a second copy of a batch still running
   — a Slurm job left by a killed Snakemake, resubmitted by the next one — stops in one line
   before it touches anything, since step 1 would remove the first copy's runs in progress.
1. Leftovers of interrupted attempts at the batch's runs are removed; finished runs (a
   ``run.json`` in their final directory) are skipped unless ``force_rerun``.
2. If anything is left to do, ONE model server is started for the batch (vLLM on the
   cluster, the scripted stand-in for the demo: the same code path, :mod:`forgetting.run.model_server`),
   and mini-swe-agent and litellm are imported once.
3. Each pending run is a forked child process (``execution.concurrency`` at a time): it
   inherits the imports (a fork costs milliseconds, a fresh interpreter seconds), has its own
   process group and its own deletion proxy, and reports back through its temporary
   directory. The batch writes ``run.json`` and renames the directory into place.
4. A run whose process was killed, or that met an infrastructure failure (model server
   gone, proxy or workspace could not be made) is not finalized; the other runs go on. If
   the model server dies, the runs in flight are stopped and the rest are not started. At
   the end the batch raises :class:`RunsNotFinished` naming those runs, so Snakemake
   retries the job and only they run again. Otherwise the manifest is written (atomically).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forgetting.agents import action_syntax, prepare_environment
from forgetting.foundation import locks
from forgetting.foundation.atomic import write_json
from forgetting.foundation.errors import UserError
from forgetting.foundation.faults import checkpoint
from forgetting.foundation.layout import BATCH_DOWNSTREAM, CALLS, PATCH, RUN_JSON, Layout
from forgetting.foundation.stagelog import StageLog
from forgetting.prompt import tokenizer
from forgetting.records import RunRecord, is_finished, read_run_record
from forgetting.run.counting import counting_for, counting_line
from forgetting.run.execute import child_main
from forgetting.run.mini import preload as preload_mini
from forgetting.run.model_server import cache_info, serving, with_loopback_no_proxy
from forgetting.run.outcome import AgentOutcome
from forgetting.run.rundir import OUTCOME_FILE, finalize, remove_stale, temp_dir_for
from forgetting.run.trae import check_ready
from forgetting.run.versions import agent_version, model_version, pipeline_version
from forgetting.run.workspace import check_task_rows
from forgetting.study.config import Study, study_from_mapping
from forgetting.study.plan import Batch, Run, plan_batches
from forgetting.study.runner import RunnerSettings

#: how often the batch looks at its runs and its model server
POLL_S = 0.05
#: how often the model server's health endpoint is asked (besides watching its process)
HEALTH_EVERY_S = 30.0


class RunsNotFinished(UserError):
    """Some runs of a batch met an infrastructure failure; rerunning the batch redoes them."""


class BatchBusy(UserError):
    """Another live process runs this batch."""


#: the batch's lock file, in its directory (beside its manifest)
BATCH_LOCK = ".batch.lock"


@contextlib.contextmanager
def batch_lock(directory: Path, key: str, say: StageLog) -> Iterator[None]:
    """Hold the lock of the batch whose directory is ``directory`` for the ``with`` block (the
    batch process's own, :mod:`forgetting.foundation.locks`: its forked runs do not hold it, and
    the kernel frees it however the batch ends). Held by a live process: :class:`BatchBusy`,
    naming it. A file system that takes no lock: one line in the batch's log, and the batch
    goes on unguarded."""
    fd: int | None = None
    try:
        fd = locks.take(directory / BATCH_LOCK, key)
    except locks.Held as held:
        h = held.holder
        raise BatchBusy(
            f"{key}: this batch is running already (pid {h.pid} on {h.host}, since {h.since}); a second copy would "
            "remove its runs in progress: wait for it to end, or stop it (on a cluster: squeue, then scancel its "
            "job), then run the same command again") from None
    except OSError as exc:
        say.line(f"{key}: no lock on {directory} ({exc.strerror or exc}): do not run this batch twice at once")
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)


@dataclass
class Running:
    run: Run
    pid: int
    started: float  # unix time
    t0: float  # monotonic
    run_dir: Path

    @property
    def temp(self) -> Path:
        return temp_dir_for(self.run_dir, self.pid)


@dataclass
class BatchReport:
    """What a batch did: every run's manifest entry, and the runs that did not finish."""

    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    done: int = 0
    skipped: int = 0


def served_model(study: Study, settings: RunnerSettings) -> dict[str, Any]:
    """The model section the batch's server is started from: vLLM schedules at most the
    batch's ``execution.concurrency`` sequences unless ``model.vllm.max_num_seqs`` says otherwise;
    the scripted stand-in learns where the demo tasks are; an endpoint's address file is
    resolved against the study's root."""
    model = study.model.as_dict()
    if model["backend"] == "vllm" and model["vllm"].get("max_num_seqs") is None:
        model["vllm"] = {**model["vllm"], "max_num_seqs": settings.concurrency}
    if model["backend"] == "scripted":
        scripted = dict(model["scripted"])
        scripted.setdefault("tasks", str(settings.instances))
        model["scripted"] = scripted
    address = model["endpoint"].get("address_file")  # optional: base_url instead
    if study.endpoint is not None and address:
        model["endpoint"] = {**model["endpoint"], "address_file": str(study.endpoint.address_file)}
    return model


def _entry(status: str, turns: Any) -> dict[str, Any]:
    return {"status": status, "turns": turns, "resolved": None}


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def call_stats(calls_path: Path) -> tuple[int, float | None]:
    """(model calls answered, seconds spent waiting for them) from a call log; reads only the
    ``call`` records (a torn last line, from a killed run, is skipped)."""
    if not calls_path.is_file():
        return 0, None
    answered, waited = 0, 0.0
    with open(calls_path, encoding="utf-8") as fh:
        for line in fh:
            if '"type":"call"' not in line:
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("type") != "call" or not rec.get("ok"):
                continue
            answered += 1
            if rec.get("t_request") and rec.get("t_response"):
                waited += float(rec["t_response"]) - float(rec["t_request"])
    return answered, round(waited, 3)


class BatchRunner:
    """Runs the pending runs of one batch; see the module docstring."""

    def __init__(
        self, study: Study, batch: Batch, settings: RunnerSettings, say: StageLog, manifest: Path | None = None
    ) -> None:
        self.study = study
        self.manifest = manifest  # None: a run on its own (forgetting run), no batch files
        self.invalidated = False
        self.batch = batch
        self.settings = settings
        self.say = say
        self.layout = Layout(study.results_dir)
        self.proxy_settings = study.proxy
        #: start_proxy's ``counting`` and ``server_info`` (set once the server is known)
        self.proxy_options: dict[str, Any] = {}
        self.report = BatchReport()
        self.running: dict[int, Running] = {}
        self.pending: deque[Run] = deque()
        self.total = 0
        self.versions: dict[str, Any] = {}
        self.check_now = False
        self.server: Any = None

    # ------------------------------------------------------------------ planning

    def plan(self) -> list[Run]:
        """Remove leftovers; skip finished runs; return the runs to do."""
        run_dirs = {r.run_id: self.layout.run_dir(r.run_id) for r in self.batch.runs}
        removed = remove_stale(run_dirs.values())
        if removed:
            self.say.line(f"removed {len(removed)} leftover(s) of interrupted runs")
        todo = []
        for run in self.batch.runs:
            run_dir = run_dirs[run.run_id]
            if is_finished(run_dir) and not self.settings.force_rerun:
                record = read_run_record(run_dir / RUN_JSON)
                self.report.entries[run.run_id] = _entry(record.status, record.turns)
                self.report.skipped += 1
            else:
                todo.append(run)
        return todo

    # ------------------------------------------------------------------ processes

    def _fork(self, run: Run, model_url: str, scratch: Path, access: Any = None) -> None:
        run_dir = self.layout.run_dir(run.run_id)
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        started = time.time()
        sys.stdout.flush()
        sys.stderr.flush()
        # no stop signal while forking: its exception would land in an at-fork hook (logging's),
        # where Python ignores it and the batch goes on; held, it is raised once the child is known
        pid = -1
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            pid = os.fork()
            if pid > 0:
                self.running[pid] = Running(run, pid, started, time.monotonic(), run_dir)
        finally:
            if pid != 0:
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        if pid == 0:  # the run's process: never returns into the caller
            code = 70
            try:
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
                code = child_main(
                    run,
                    self.settings,
                    out=temp_dir_for(run_dir, os.getpid()),
                    scratch=scratch / f"{os.getpid()}",
                    model_url=model_url,
                    proxy_settings=self.proxy_settings,
                    access=access,
                    proxy_options=self.proxy_options,
                )
            finally:
                os._exit(code)

    def _kill(self, slot: Running) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(slot.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.kill(slot.pid, signal.SIGKILL)

    def _reap(self) -> list[tuple[Running, int]]:
        done = []
        for pid in list(self.running):
            try:
                got, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                got, status = pid, 0
            if got == pid:
                done.append((self.running.pop(pid), status))
        return done

    # ------------------------------------------------------------------ outcomes

    def _fail(self, run: Run, reason: str) -> None:
        self.report.failures[run.run_id] = reason
        self.check_now = True  # is the model server still there? (the loop asks at once)
        self.report.done += 1
        self.say.line(f"[{self.report.done}/{self.total}] {run.run_id} NOT FINISHED: {reason}")

    def _record(self, slot: Running, wait_status: int | None, *, timed_out: bool = False) -> None:
        run, temp = slot.run, slot.temp
        wall = time.monotonic() - slot.t0
        if timed_out:
            outcome = AgentOutcome(
                status="error", exit_status="TimeExceeded",
                error=f"killed after {wall:.0f} s (execution.run_timeout_s {self.settings.run_timeout_s} s)",
            )
            outcome.turns = call_stats(temp / CALLS)[0]
        else:
            code = _exit_code(wait_status)
            data = _read_json(temp / OUTCOME_FILE)
            if code != 0 or not data:
                how = f"killed by signal {-code}" if code is not None and code < 0 else f"exited with status {code}"
                self._fail(run, f"the run process was {how} before it reported an outcome")
                return
            outcome = AgentOutcome.from_dict(data)
        if outcome.infra:
            self._fail(run, outcome.error or "infrastructure failure")
            return
        record = self._run_record(run, outcome, slot, wall, temp)
        try:
            # a stop signal waits until the run directory is in place (it is renamed over the old
            # one and the old one removed) and the batch's stale files are gone
            with _signals_held():
                self._invalidate_downstream()
                finalize(temp, slot.run_dir, record)
        except OSError as exc:
            self._fail(run, f"could not finalize {slot.run_dir}: {exc}")
            return
        checkpoint("run.finalized")
        self.report.entries[run.run_id] = _entry(outcome.status, outcome.turns)
        self.report.done += 1
        self.say.line(
            f"[{self.report.done}/{self.total}] {run.run_id} {outcome.status} in {wall:.0f} s "
            f"({outcome.turns} turns{', ' + outcome.error if outcome.error else ''})"
        )

    def _run_record(self, run: Run, outcome: AgentOutcome, slot: Running, wall: float, temp: Path) -> RunRecord:
        patch = temp / PATCH
        return RunRecord.for_run(
            run,
            status=outcome.status,
            exit_status=outcome.exit_status,
            turns=outcome.turns,
            turn_cap=self.settings.turn_cap,
            agent_calls=outcome.extra.get("agent_calls"),
            started=round(slot.started, 3),
            wall_s=round(wall, 3),
            model_s=call_stats(temp / CALLS)[1],
            agent_exit_code=outcome.agent_exit_code,
            patch_bytes=patch.stat().st_size if patch.is_file() else 0,
            error=outcome.error,
            model_backend=self.server.model_backend if self.server is not None else self.settings.backend,
            versions={
                "agent": self.versions["agents"][run.agent],
                "model": self.versions["model"],
                "pipeline": self.versions["pipeline"],
            },
        )

    def _invalidate_downstream(self) -> None:
        """Before the batch changes its first run directory: remove its manifest, evaluation
        manifest and analysis tables, and the study's datasets, statistics, tables, figures and
        report (:meth:`Layout.study_downstream`), which describe its runs as they were. A redone
        run's own evaluation goes with its old directory (the run directory is replaced whole).
        All of it is gone before the first run directory is replaced (stop signals are held; a
        SIGKILL in the middle leaves only files of runs still on disk, and the next batch that
        changes a run removes the rest). Whatever stops the batch after this, nothing left
        describes runs that are no longer on disk, and the workflow makes them again (they are
        its targets). Nothing outside the results directory is touched: a symlink is removed,
        never followed."""
        if self.invalidated or self.manifest is None:
            return
        self.invalidated = True
        stale = [self.manifest, *(self.layout.batch_dir(self.batch.key) / name for name in BATCH_DOWNSTREAM)]
        for key in self._whole_study_batches():  # the same runs in the whole study's batches
            stale += [self.layout.batch_dir(key) / name for name in ("runs.json", *BATCH_DOWNSTREAM)]
        stale += self.layout.study_downstream()
        removed = [_where(path, self.layout.results) for path in stale if _remove(path)]
        if removed:
            self.say.line(f"{self.batch.key}: its runs change: removed {', '.join(removed)} (made again after them)")

    def _whole_study_batches(self) -> list[str]:
        """The batches of the whole study that hold this batch's runs, where they are others:
        a study narrowed to some tasks (``only_tasks``) batches their runs under names of its
        own, so the whole study's batch files of a redone run would describe it as it was."""
        if not self.study.raw.get("only_tasks"):
            return []
        whole = study_from_mapping({**self.study.as_config(), "only_tasks": None}, source="config",
                                   root=self.study.root)
        mine = {r.run_id for r in self.batch.runs}
        return sorted(b.key for b in plan_batches(whole) if b.key != self.batch.key and mine & {
            r.run_id for r in b.runs})

    # ------------------------------------------------------------------ the loop

    def execute(self, todo: list[Run], model_url: str, server: Any, scratch: Path) -> None:
        self.server = server
        self.versions = {
            "agents": {a: agent_version(a, self.settings) for a in sorted({r.agent for r in todo})},
            "model": model_version(self.settings.model, server),
            "pipeline": pipeline_version(),
        }
        self.pending = deque(todo)
        self.total = len(todo)
        next_health = time.monotonic() + HEALTH_EVERY_S
        server_lost: str | None = None
        access = getattr(server, "access", None)
        while self.pending or self.running:
            _check_stop()
            if server_lost is None:
                due = self.check_now or time.monotonic() >= next_health
                server_lost = server.trouble(due)
                if due:
                    self.check_now = False
                    next_health = time.monotonic() + HEALTH_EVERY_S
                if server_lost is not None:
                    self.say.line(f"model server lost: {server_lost}; stopping the runs in flight")
                    for slot in self.running.values():
                        self._kill(slot)
                    while self.pending:
                        self._fail(self.pending.popleft(), f"not started: {server_lost}")
            while self.pending and len(self.running) < self.settings.concurrency:
                self._fork(self.pending.popleft(), model_url, scratch, access)
            for slot, status in self._reap():
                if server_lost is not None:
                    self._fail(slot.run, f"stopped: {server_lost}")
                else:
                    self._record(slot, status)
            for slot in list(self.running.values()):
                if time.monotonic() - slot.t0 > self.settings.kill_after_s:
                    self._kill(slot)
                    with contextlib.suppress(ChildProcessError):
                        os.waitpid(slot.pid, 0)
                    self.running.pop(slot.pid, None)
                    self._record(slot, None, timed_out=True)
            if self.running:
                time.sleep(POLL_S)

    def stop_all(self) -> None:
        for slot in self.running.values():
            self._kill(slot)
        for slot in list(self.running.values()):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(slot.pid, 0)
        self.running.clear()


def _remove(path: Path) -> bool:
    """Remove a file, or a directory with everything in it (a symlink as itself, never what it
    links to); whether there was anything. What another batch removes meanwhile is no error."""
    try:
        if path.is_dir() and not path.is_symlink():
            if sys.version_info >= (3, 12):
                shutil.rmtree(path, onexc=_unless_gone)
            else:
                shutil.rmtree(path, onerror=lambda f, p, info: _unless_gone(f, p, info[1]))
        else:
            path.unlink()
    except FileNotFoundError:
        return False
    return True


def _unless_gone(func: Any, path: str, exc: BaseException) -> None:
    if not isinstance(exc, FileNotFoundError):
        raise exc


def _where(path: Path, results: Path) -> str:
    return str(path.relative_to(results)) if path.is_relative_to(results) else path.name


def _by_reason(failures: dict[str, str]) -> str:
    """The unfinished runs, grouped by why: ``reason (run, run, …); reason (run)``; each
    reason once, however many runs met it (an endpoint that went away stops them all)."""
    groups: dict[str, list[str]] = {}
    for rid, why in sorted(failures.items()):
        groups.setdefault(why, []).append(rid)
    return "; ".join(f"{why} ({', '.join(rids)})" for why, rids in groups.items())


def _exit_code(wait_status: int | None) -> int | None:
    if wait_status is None:
        return None
    return os.waitstatus_to_exitcode(wait_status)


class Terminated(SystemExit):
    """SIGTERM (Snakemake cancelling the job, Slurm ending it): unwind, stop runs and server."""


#: the signals that stop a batch: Ctrl-C (a terminal sends it to the whole process group) and SIGTERM
STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})
#: stop signals received and not yet acted on (see :func:`_check_stop`)
_received: list[int] = []


def _stop_exception(signum: int) -> BaseException:
    return KeyboardInterrupt() if signum == signal.SIGINT else Terminated(128 + signum)


def _raise_stop(signum: int, frame: Any) -> None:
    _received.append(signum)
    raise _stop_exception(signum)


def _check_stop() -> None:
    """Raise for a stop signal whose exception was swallowed where it landed (Python ignores an
    exception raised in an at-fork hook, a finalizer or a weakref callback: the batch went on)."""
    if _received:
        raise _stop_exception(_received[-1])


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Stop signals held (blocked) for the block; one that came meanwhile is raised after it."""
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


@contextlib.contextmanager
def _stop_as_exception() -> Iterator[None]:
    """SIGTERM as :class:`Terminated`, SIGINT as KeyboardInterrupt (where it is not ignored),
    each remembered until the batch has stopped."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    _received.clear()
    for sig in STOP_SIGNALS:
        if previous[sig] != signal.SIG_IGN:
            signal.signal(sig, _raise_stop)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _received.clear()


@contextlib.contextmanager
def _scratch(settings: RunnerSettings, batch: Batch) -> Iterator[Path]:
    settings.scratch_dir.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=f"forgetting-{batch.name}-", dir=settings.scratch_dir))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def preload(agents: set[str], scratch: Path, settings: RunnerSettings) -> None:
    """Load what every run needs once, before forking (the proxy is imported with this
    module): the tokenizer's vocabulary and, for mini-swe-agent, the agent with litellm; and
    read each mini agent's action pattern from its config, so that a bad one stops the batch
    before any run."""
    tokenizer.count("warm up")
    if agents & {"mini", "mini-text"}:
        prepare_environment(scratch / "mswea-config")
        preload_mini()
        for agent in sorted(agents & {"mini", "mini-text"}):
            action_syntax(agent, settings.mini_config_files.get(agent))


def server_log_path(study: Study, batch: Batch, manifest: str | os.PathLike[str] | None) -> Path:
    """The model server's log: beside the batch's manifest (kept after the job)."""
    if manifest is not None:
        return Path(manifest).parent / "model_server.log"
    return Layout(study.results_dir).batch_dir(batch.key) / "model_server.log"


def run_batch(
    study: Study,
    batch: Batch,
    *,
    manifest: str | os.PathLike[str] | None = None,
    log: str | os.PathLike[str] | None = None,
    echo: bool = True,
) -> dict[str, Any]:
    """Run every unfinished run of ``batch`` and write its manifest (see the module docstring).

    The manifest maps each run id to ``status``, ``turns`` and ``resolved`` (None: the
    evaluation fills it in its own manifest). Raises :class:`RunsNotFinished` when a run met
    an infrastructure failure; the finished runs are kept and are not redone next time.
    """
    settings = study.runner
    # the agents' model clients (litellm, Trae's openai) and their containers reach the run's
    # proxy on loopback directly, never through a site's http_proxy
    os.environ.update(with_loopback_no_proxy(os.environ))
    with StageLog(log, echo=echo) as say, _stop_as_exception(), \
            batch_lock(server_log_path(study, batch, manifest).parent, batch.key, say):
        runner = BatchRunner(study, batch, settings, say, None if manifest is None else Path(manifest))
        todo = runner.plan()
        if runner.report.skipped:
            say.line(f"{batch.key}: {runner.report.skipped} of {len(batch.runs)} runs finished before; kept")
        if todo:
            check_task_rows(settings, {r.task for r in todo})
            if any(r.agent == "trae" for r in todo):
                check_ready(settings)
            model = served_model(study, settings)
            # the study's own model section (the schema's keys; served_model adds the server's): a missing
            # tokenizer fails before the server starts
            counting = counting_for(study.model.section, study.root)
            with _scratch(settings, batch) as scratch:
                what = "checking the model endpoint" if settings.backend == "endpoint" else (
                    f"starting the {settings.backend} model server")
                say.line(f"{batch.key}: {len(todo)} runs to do, {settings.concurrency} at a time; {what}")
                with serving(
                    model, log_path=server_log_path(study, batch, manifest), seed=study.seed,
                    scratch=scratch, proxy_settings=runner.proxy_settings, say=say.line,
                ) as server:
                    say.line(server.ready_line())
                    # after the server answered: a bad endpoint is one line at once, before the
                    # seconds litellm takes to import
                    preload({r.agent for r in todo}, scratch, settings)
                    info = cache_info(server.base_url)
                    runner.proxy_options = {"counting": counting, "server_info": info}
                    block = info.get("kv_block_size", "not reported")
                    say.line(f"prompts counted: {counting_line(counting)}; prefix-cache block: {block}")
                    try:
                        runner.execute(todo, server.base_url, server, scratch)
                    finally:
                        runner.stop_all()
        report = runner.report
        if report.failures:
            raise RunsNotFinished(
                f"{batch.key}: {len(report.failures)} of {len(batch.runs)} runs did not finish and will be "
                f"redone by the next invocation: {_by_reason(report.failures)}"
            )
        statuses = Counter(e["status"] for e in report.entries.values())
        document = {
            "batch": batch.key,
            "runs": {r.run_id: report.entries[r.run_id] for r in batch.runs},
            "summary": {"runs": len(batch.runs), "statuses": dict(sorted(statuses.items()))},
        }
        if manifest is not None:
            write_json(manifest, document)
        say.line(f"{batch.key}: " + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())))
        return document


def run_one(study: Study, run: Run, **kwargs: Any) -> dict[str, Any]:
    """One run with its own model server (``forgetting run``)."""
    return run_batch(study, Batch(run.agent, run.configuration, "single", (run,)), **kwargs)
