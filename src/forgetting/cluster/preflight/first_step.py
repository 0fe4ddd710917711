"""``forgetting preflight --first-step``: each agent of the study, on the study's first task, one
run limited to ONE model call (``agent.turn_cap: 1`` in a derived study), run by the batch code
itself (:func:`forgetting.run.run_batch`): the served model started as a batch job starts it, each
agent launched with a run's own command line — the same ``apptainer exec``, binds, writable layer
and environment — into ``<results>/preflight/first-step/`` (removed first: never mixed with the
study's runs). Nothing is evaluated.

One batch holds every agent's run, so the model server starts once. An agent passes when what its
run recorded says, read through the run records' own readers:

* the call: its call log (:func:`forgetting.records.calllog.read_call_log`) holds exactly one
  call, answered by the served model (status 200, a reply with content or tool calls);
* its prompt count: the proxy's count of that call's prompt, with the served model's tokenizer
  and template (``model.tokenizer``), equals the server's ``usage.prompt_tokens`` within
  ``pricing.prompt_tolerance`` (:func:`prompt_count`; Qwen's approximation is reported, not failed);
* its action: the agent executed the reply's action — mini-swe-agent's trajectory has a command's
  output after its first assistant message, Trae's first agent step a tool result
  (:func:`forgetting.records.read_trajectory`);
* then it stopped at the cap: the run is finalized (``run.json``,
  :func:`forgetting.records.read_run_record`) as ``capped`` (or ``submitted``), with no error and
  no Python traceback in the agent's log.

A failure is one line naming the agent, the stage (the server's start, the agent's launch, the
call, the prompt count, its action, its stop at the cap) and the log file to read. A run that met an infrastructure
failure is not finalized (:mod:`forgetting.run.batch`): its files stay in the run's temporary
directory, where its outcome (``.outcome.json``) says why.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from forgetting.cluster.preflight.checks import Check, last_line
from forgetting.cost.result import prompt_mismatch
from forgetting.foundation.errors import RunOutputError, UserError
from forgetting.foundation.layout import AGENT_LOG, CALLS, RUN_JSON, TRAJECTORY, Layout
from forgetting.records import MiniTrajectory, TraeTrajectory, read_run_record, read_trajectory
from forgetting.records.calllog import CallLog, read_call_log
from forgetting.run import run_batch
from forgetting.run.batch import RunsNotFinished, server_log_path
from forgetting.run.model_server import ModelServerError
from forgetting.run.outcome import CAPPED, SUBMITTED, AgentOutcome
from forgetting.run.rundir import OUTCOME_FILE, stale_dirs
from forgetting.study.config import Study, study_from_mapping
from forgetting.study.plan import Batch, Run, batch_name, plan_batches

#: the statuses of a run that stopped as it should after its one call
STOPPED = (CAPPED, SUBMITTED)
TRACEBACK = "Traceback (most recent call last)"


def first_step_study(study: Study) -> Study:
    """The study narrowed to one baseline run per agent of its first task, capped at one model call,
    with its results under ``<results>/preflight/first-step``."""
    raw = json.loads(json.dumps(study.as_config(), default=str))
    raw.update(only=["baseline"], only_tasks=[study.tasks[0]], only_agents=None, force_rerun=True)
    raw["repeats"] = {**raw["repeats"], "baseline": 1}
    raw["agent"] = {**raw["agent"], "turn_cap": 1}
    raw["study"] = {**raw["study"], "results_dir": str(study.results_dir / "preflight" / "first-step")}
    return study_from_mapping(raw, source=f"{study.source} (first step)", root=study.root)


def check_name(agent: str) -> str:
    return f"first step {agent}"


@dataclass(frozen=True)
class RunFiles:
    """What one run left: its directory (final, or the temporary one of a run not finalized) and
    how it ended (``run.json``'s status and error, else its process's outcome)."""

    where: Path | None
    finished: bool
    status: str | None
    error: str | None

    @property
    def agent_log(self) -> Path | None:
        return self.where / AGENT_LOG if self.where else None

    def agent_log_text(self) -> str:
        log = self.agent_log
        return log.read_text(encoding="utf-8", errors="replace") if log is not None and log.is_file() else ""


def run_files(layout: Layout, run: Run) -> RunFiles:
    run_dir = layout.run_dir(run.run_id)
    if (run_dir / RUN_JSON).is_file():
        record = read_run_record(run_dir / RUN_JSON)
        return RunFiles(run_dir, True, record.status, record.error)
    temps = [p for p in stale_dirs(run_dir) if ".tmp-" in p.name]
    if not temps:
        return RunFiles(None, False, None, None)
    where = temps[-1]
    outcome = None
    if (where / OUTCOME_FILE).is_file():
        try:
            outcome = AgentOutcome.from_dict(json.loads((where / OUTCOME_FILE).read_text(encoding="utf-8")))
        except (ValueError, TypeError, OSError):
            outcome = None
    return RunFiles(where, False, outcome.status if outcome else None, outcome.error if outcome else None)


#: the lines the run's process adds after the agent's own output (forgetting.run.execute)
RUNNER_TAIL = ("agent finished (", "outcome: ", "the agent stopped (")


def agent_output(text: str) -> str:
    """An agent log without the runner's closing lines: what the agent itself printed last."""
    lines = text.splitlines()
    while lines and (not lines[-1].strip() or lines[-1].startswith(RUNNER_TAIL)):
        lines.pop()
    return "\n".join(lines)


def _failed_call(log: CallLog) -> str:
    rec = log.failed[-1]
    return f"the model server answered status {rec.get('status')}: {last_line(str(rec.get('error') or ''))}"


def _action_done(traj: MiniTrajectory | TraeTrajectory) -> tuple[bool, str]:
    """(whether the first reply's action was executed, what was seen)."""
    if isinstance(traj, TraeTrajectory):
        if not traj.steps:
            return False, "Trae's trajectory has no agent step"
        results = traj.steps[0].tool_results
        if not results:
            return False, "Trae's first agent step has no tool result" + (
                f" (step error: {last_line(traj.steps[0].error)})" if traj.steps[0].error else "")
        return True, f"{len(results)} tool result(s) in its first step"
    calls = [m for m in traj.messages if m.is_call]
    if not calls or calls[0].role != "assistant":
        return False, "mini-swe-agent's trajectory has no assistant message (the reply was not taken as an action)"
    outputs = []
    for m in traj.messages[calls[0].index + 1:]:
        if m.is_call:
            break
        if m.interrupt_type is None and (m.role == "tool" or (m.role == "user" and m.raw_output is not None)):
            outputs.append(m)
    if not outputs:
        return False, "mini-swe-agent's trajectory has no command output after its first assistant message"
    return True, f"{len(outputs)} command output(s) after its first assistant message"


def prompt_count(log: CallLog, tolerance: float) -> tuple[str, str | None]:
    """(what the first call's prompt count shows, the failure or None). The proxy's count of the
    prompt (P_1, what the cost stage prices) against the server's ``usage.prompt_tokens``: counted
    with the served model's tokenizer and template (``model.tokenizer``), a difference beyond
    ``pricing.prompt_tolerance`` fails — every later prompt would be mispriced; Qwen's
    approximation is reported, never failed (a provider that tokenizes nothing for you)."""
    call = log.calls[0]
    counted, reported = len(log.prompt_ids(call)), call.usage.prompt_tokens
    if reported is None:
        return f"prompt: {counted:,} tokens counted, the server reported no prompt_tokens", None
    if log.prompt_count != "served":
        off = (counted - reported) / reported * 100 if reported else 0.0
        return (f"prompt: {counted:,} tokens counted with Qwen's approximation, {reported:,} by the server "
                f"({off:+.1f} %)"), None
    if prompt_mismatch(counted, reported, tolerance):
        return "", (f"the proxy counted {counted:,} prompt tokens with the served model's tokenizer and chat "
                    f"template, the server {reported:,} (beyond pricing.prompt_tolerance = {tolerance:g}): "
                    "every prompt would be mispriced; check model.tokenizer_dir and model.chat_template "
                    "(docs/cost.md, Prompts counted by the served model)")
    return f"prompt: {counted:,} tokens, as the server counted them", None


def run_verdict(study: Study, run: Run, layout: Layout, server_log: Path, batch_failure: str | None) -> Check:
    """The check of one agent's first step from what its run recorded (module docstring)."""
    name = check_name(run.agent)
    files = run_files(layout, run)

    def fail(stage: str, what: str, log: Path | None) -> Check:
        return Check(name, False, f"{run.task}: {stage}: {what}; see {log}")

    if files.where is None:
        return fail("the agent's launch", f"the run was not started ({batch_failure or 'no run directory'})",
                    layout.results / "logs" / "first-step.log")
    agent_log = files.agent_log
    calls_path = files.where / CALLS
    why = files.error or last_line(files.agent_log_text())
    try:
        log = read_call_log(calls_path, allow_torn=True) if calls_path.is_file() else None
    except RunOutputError as exc:
        return fail("the call", str(exc), calls_path)
    if log is None or (not log.calls and not log.failed):
        ends = last_line(agent_output(files.agent_log_text()))
        said = why if ends == why else f"{why}; its log ends: {ends}"
        return fail("the agent's launch", f"the agent made no model call ({said})", agent_log)
    if not log.calls:
        # the server's own log where the batch started it; an endpoint's is elsewhere: the call log
        served = study.runner.backend != "endpoint" and server_log.is_file()
        return fail("the call", _failed_call(log) + (f" ({files.error})" if files.error else ""),
                    server_log if served else calls_path)
    cap = study.runner.turn_cap
    if len(log.calls) != cap:
        return fail("its stop at the cap", f"{len(log.calls)} calls answered, expected {cap} (agent.turn_cap)",
                    agent_log)
    reply = log.calls[0].response
    if not (reply.get("content") or reply.get("tool_calls")):
        return fail("the call", "the served model's reply has neither content nor tool calls", calls_path)
    counted, problem = prompt_count(log, study.pricing.prompt_tolerance)
    if problem is not None:
        return fail("the prompt count", problem, calls_path)
    trajectory = files.where / TRAJECTORY
    if not trajectory.is_file():
        return fail("its action", f"the agent wrote no trajectory ({why})", agent_log)
    try:
        done, seen = _action_done(read_trajectory(trajectory))
    except RunOutputError as exc:
        return fail("its action", str(exc), trajectory)
    if not done:
        return fail("its action", seen, agent_log)
    if not files.finished:
        return fail("its stop at the cap", f"the run was not finalized: {files.error or batch_failure}", agent_log)
    if files.status not in STOPPED or files.error:
        return fail("its stop at the cap", f"the run ended {files.status}: {files.error}", agent_log)
    text = files.agent_log_text()
    if TRACEBACK in text:
        tail = last_line(text[text.rindex(TRACEBACK):])
        return fail("its stop at the cap", f"an exception in the agent's log: {tail}", agent_log)
    return Check(name, True, f"{run.task}: 1 call answered by the {study.model.section['backend']} server, "
                 f"its action executed ({seen}), then {files.status} ({files.where}); {counted}")


def first_step_checks(study: Study) -> list[Check]:
    """One check per agent of the study (module docstring)."""
    first = first_step_study(study)
    shutil.rmtree(first.results_dir, ignore_errors=True)
    layout = Layout(first.results_dir)
    runs = tuple(r for b in plan_batches(first) for r in b.runs)
    batch = Batch("agents", "first-step", batch_name(runs, 0), runs)
    manifest = layout.batch_dir(batch.key) / "runs.json"
    log = first.results_dir / "logs" / "first-step.log"
    server_log = server_log_path(first, batch, manifest)
    failure: str | None = None
    try:
        run_batch(first, batch, manifest=manifest, log=log, echo=False)
    except RunsNotFinished as exc:
        failure = str(exc)  # each run's own files say which and why
    except ModelServerError as exc:
        return [Check(check_name(r.agent), False, f"{r.task}: the server's start: {last_line(str(exc))}; "
                      f"see {server_log}") for r in runs]
    except UserError as exc:  # before any run: the task's row, Trae's image, an agent's config
        return [Check(check_name(r.agent), False, f"{r.task}: the agent's launch: {last_line(str(exc))}; "
                      f"see {log}") for r in runs]
    return [run_verdict(first, r, layout, server_log, failure) for r in runs]
