"""One synthetic run, written in the exact on-disk format of a real run.

The loop is the real one with the agent and the model replaced: the history the agent holds
goes through the real deletion engine (:class:`forgetting.deletion.Reducer`, one per run, as
the proxy keeps it), the reduced prompt is logged by the real :class:`CallLogWriter`
(content-addressed segments with their token ids, the ``deleted`` records of each call), and
the synthetic agent decides its next step from what survived deletion. The run directory
— ``calls.jsonl``, ``trajectory.json``, ``patch.diff``, ``eval.json`` and ``run.json``
(last) — is built in a hidden temporary directory beside its place and renamed into place
whole, as the runner does. Times are synthetic (a clock advanced by modelled latencies), so
the same seed gives the same bytes.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from forgetting import __version__
from forgetting.agents import action_syntax
from forgetting.deletion import Reducer
from forgetting.foundation.atomic import replace_dir
from forgetting.foundation.layout import CALLS, EVAL_JSON, PATCH, RUN_JSON, TRAJECTORY, Layout
from forgetting.foundation.seeds import derive_seed, unit
from forgetting.prompt import chat_format, tokenizer
from forgetting.prompt.messages import ActionSyntax
from forgetting.records import SYNTHETIC_BACKEND, RunRecord, write_run_record
from forgetting.records.calllog import CallLogWriter
from forgetting.records.eval_report import EvalReport, patch_digest
from forgetting.study.config import Study
from forgetting.study.plan import Run
from forgetting_testkit.synth.agent import Sight, SyntheticAgent, profile_of
from forgetting_testkit.synth.render import Rendered, TraeRenderer, renderer_for, unified_diff
from forgetting_testkit.synth.trajectories import TraeCall, mini_trajectory, trae_trajectory
from forgetting_testkit.synth.world import task_world

#: what eval.json says produced it (run.json: ``model_backend`` SYNTHETIC_BACKEND, the synthetic marker)
EVAL_BACKEND = "synthetic"
SYNTH_FORMAT = "forgetting-synth/1"
EVAL_NOTE = "synthetic evaluation: the outcome was drawn by `forgetting-synth`; no test was run"
#: the study's clock starts here (2026-01-01 UTC) and each run at its own offset
EPOCH = 1_767_225_600.0


class _CountingWriter(CallLogWriter):
    """The call log writer, also filling ``usage.prompt_tokens`` from the segments it logs —
    what the model server reports for a prompt — and remembering the last prompt's length."""

    def __init__(self, path: Path, header: Mapping[str, Any], created: float) -> None:
        self.lengths: dict[str, int] = {}
        self.last_prompt_tokens = 0
        super().__init__(path, header, created=created)

    def _write(self, record: Mapping[str, Any]) -> None:
        kind = record.get("type")
        if kind == "segment":
            self.lengths[record["key"]] = int(record["n_tokens"])
        elif kind == "call":
            n = sum(self.lengths[k] for k in record["segments"]) + len(chat_format.generation_prompt_ids())
            self.last_prompt_tokens = n
            usage = record.get("usage")
            if isinstance(usage, dict):
                usage["prompt_tokens"] = n
                usage["total_tokens"] = n + int(usage.get("completion_tokens", 0))
        super()._write(record)


@dataclass(frozen=True)
class RunResult:
    run_id: str
    status: str
    turns: int
    resolved: bool
    eval_status: str
    bytes: int


def _new_bytes(messages: list[dict[str, Any]]) -> int:
    """An upper bound on the tokens these messages add to a prompt (a token is ≥ 1 byte)."""
    n = 0
    for m in messages:
        n += 16 + len(str(m.get("content") or "").encode())
        for call in m.get("tool_calls") or []:
            n += 32 + len(json.dumps(call, ensure_ascii=False).encode())
    return n


def _dump(path: Path, obj: Any) -> int:
    data = (json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
    path.write_bytes(data)
    return len(data)


def synthesize_run(study: Study, run: Run, gen_seed: int) -> RunResult:
    """Generate one run into its run directory (replacing a half-written attempt)."""
    layout = Layout(study.results_dir)
    run_dir = layout.run_dir(run.run_id)
    tmp = run_dir.with_name(f".{run_dir.name}.tmp-synth-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        result = _generate(study, run, gen_seed, tmp)
        replace_dir(tmp, run_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return result


def _generate(study: Study, run: Run, gen_seed: int, out: Path) -> RunResult:
    model = study.model.section
    served = study.runner.served_name
    window = int(model["context_window"])
    max_tokens = int(model["max_tokens"])
    cap = int(study.agent.turn_cap)
    world = task_world(run.task, gen_seed)
    rng = np.random.default_rng(derive_seed(gen_seed, run.run_id))
    agent = SyntheticAgent(world, profile_of(run.agent), rng, scopes=run.deletion.parts)
    render = renderer_for(run.agent, world, rng)
    # the agent's own action pattern, as the runner hands it to the proxy
    actions = action_syntax(run.agent, study.runner.mini_config_files.get(run.agent))
    reducer = Reducer(run.deletion, run.seed, actions=actions,
                      settings=study.deletion)
    tools = render.tools
    header = {
        "run_id": run.run_id,
        "seed": run.seed,
        "deletion": run.deletion.as_dict(),
        "tokenizer": tokenizer.TOKENIZER_NAME,
        "chat_format": chat_format.FORMAT_NAME,
        "upstream": "synthetic://forgetting-synth",
        "synthetic": True,
        "actions": actions.to_json() if actions is not None else None,
    }
    params = {"model": served, "temperature": float(model["temperature"]), "max_tokens": max_tokens}
    history: list[dict[str, Any]] = render.preamble()
    started = EPOCH + 86400.0 * 30 * unit("start", gen_seed, run.run_id)
    clock = started
    model_s = 0.0
    status, error = "submitted", None
    trae_calls: list[TraeCall] = []
    calls = 0
    pending_bytes = 0
    writer = _CountingWriter(out / CALLS, header, round(started, 3))
    try:
        while True:
            if calls >= cap:
                status = "capped"
                break
            reduction = reducer.reduce(history)
            step = agent.next_step(Sight(history, reduction.messages), cap - calls)
            rendered: Rendered = render.render(step)
            call_id = f"call_{calls + 1:03d}_{int(rng.integers(1 << 30)):08x}"
            assistant = render.assistant_message(rendered, call_id)
            response = {k: assistant.get(k) for k in ("content", "tool_calls")}
            response |= {"reasoning_content": None, "finish_reason": "tool_calls" if tools else "stop"}
            completion = len(chat_format.completion_token_ids(assistant))
            if writer.last_prompt_tokens + pending_bytes > window:
                n = len(chat_format.prompt_token_ids(reduction.messages, tools))
                if n > window:
                    message = (f"This model's maximum context length is {window} tokens. However, you requested "
                               f"{n + max_tokens} tokens ({n} in the messages, {max_tokens} in the completion).")
                    writer.append_call(messages=reduction.messages, tools=tools, params=params,
                                       deleted=reduction.deleted, response=None, usage=None,
                                       t_request=round(clock, 3), t_response=round(clock + 0.05, 3),
                                       status=400, error=message)
                    status, error = "context_exceeded", message
                    break
            t_request = clock
            latency = 0.25 + writer.last_prompt_tokens / 30000.0 + completion / 75.0
            latency *= 1.0 + 0.2 * float(rng.random())
            t_response = t_request + latency
            model_s += latency
            calls += 1
            writer.append_call(messages=reduction.messages, tools=tools, params=params, deleted=reduction.deleted,
                               response=response, usage={"completion_tokens": completion},
                               t_request=round(t_request, 3), t_response=round(t_response, 3))
            history.append(assistant)
            a_index = len(history) - 1
            obs = render.observation(rendered, call_id)
            obs_index = None
            if obs is not None:
                history.append(obs)
                obs_index = len(history) - 1
            agent.executed(step, calls, a_index, obs_index)
            if isinstance(render, TraeRenderer):
                trae_calls.append(TraeCall(t_request, rendered.reasoning, rendered.tool, rendered.arguments, call_id,
                                           rendered.output.strip() if rendered.output is not None else None,
                                           writer.last_prompt_tokens, completion))
            pending_bytes = _new_bytes([assistant] + ([obs] if obs is not None else []))
            clock = t_response + rendered.exec_s + 0.05
            if step.kind == "submit":
                break
    finally:
        writer.close()
    resolved = status == "submitted" and agent.resolved()
    patch = unified_diff(world, render.state) if status == "submitted" else ""
    total = (out / CALLS).stat().st_size
    total += _write_trajectory(out, render, history, trae_calls, status, patch, calls, cap, served, started, clock,
                               actions)
    (out / PATCH).write_text(patch, encoding="utf-8")
    total += len(patch.encode())
    eval_status = "resolved" if resolved else ("empty_patch" if not patch.strip() else "unresolved")
    total += _dump(out / EVAL_JSON, _eval_report(run, world, patch, eval_status, rng).to_dict())
    exit_status = {"submitted": "Submitted", "capped": "LimitsExceeded",
                   "context_exceeded": "ContextWindowExceededError"}[status]
    record = RunRecord.for_run(
        run,
        status=status,
        exit_status=exit_status,
        turns=calls,
        turn_cap=cap,
        agent_calls=calls,
        started=round(started, 3),
        wall_s=round(clock - started, 3),
        model_s=round(model_s, 3),
        agent_exit_code=0,
        patch_bytes=len(patch.encode()),
        error=error,
        model_backend=SYNTHETIC_BACKEND,
        versions={"agent": SYNTHETIC_BACKEND, "model": SYNTHETIC_BACKEND, "pipeline": __version__,
                  "synth": SYNTH_FORMAT, "generator_seed": gen_seed},
    )
    total += write_run_record(out / RUN_JSON, record)
    return RunResult(run.run_id, status, calls, resolved, eval_status, total)


def _write_trajectory(
    out: Path,
    render: Any,
    history: list[dict[str, Any]],
    trae_calls: list[TraeCall],
    status: str,
    patch: str,
    calls: int,
    cap: int,
    served: str,
    started: float,
    ended: float,
    actions: ActionSyntax | None,
) -> int:
    if isinstance(render, TraeRenderer):
        final = {
            "submitted": "Task completed.",
            "capped": "Task execution exceeded maximum steps without completion.",
            "context_exceeded": "Error: the model's maximum context length was exceeded.",
        }[status]
        doc = trae_trajectory(
            history[:2], trae_calls, task=render.world.statement, model_name=served, max_steps=cap,
            success=status == "submitted", final_result=final, start=started, end=ended,
            tool_names=[t["function"]["name"] for t in render.tools],
        )
    else:
        exit_status = {"submitted": "Submitted", "capped": "LimitsExceeded",
                       "context_exceeded": "ContextWindowExceededError"}[status]
        doc = mini_trajectory(history, exit_status=exit_status, submission=patch, api_calls=calls,
                              step_limit=cap, model_name=served, actions=actions)
    return _dump(out / TRAJECTORY, doc)


def _eval_report(run: Run, world: Any, patch: str, status: str, rng: np.random.Generator) -> EvalReport:
    tests = {"FAIL_TO_PASS": {"success": [], "failure": []}, "PASS_TO_PASS": {"success": [], "failure": []}}
    applied: bool | None = None
    resolution = None
    if status != "empty_patch":
        applied = True
        f2p, p2p = list(world.fail_to_pass), list(world.pass_to_pass)
        if status == "resolved":
            tests["FAIL_TO_PASS"]["success"] = f2p
            tests["PASS_TO_PASS"]["success"] = p2p
            resolution = "RESOLVED_FULL"
        else:
            k = int(rng.integers(1, len(f2p) + 1))
            tests["FAIL_TO_PASS"] = {"success": f2p[k:], "failure": f2p[:k]}
            broken = int(rng.integers(0, 3)) if p2p else 0
            tests["PASS_TO_PASS"] = {"success": p2p[broken:], "failure": p2p[:broken]}
            resolution = "RESOLVED_PARTIAL" if k < len(f2p) else "RESOLVED_NO"
    return EvalReport(
        instance_id=run.task, backend=EVAL_BACKEND, status=status, resolved=status == "resolved",
        patch_sha256=patch_digest(patch), patch_applied=applied, tests=tests, resolution=resolution,
        tests_parsed=applied, note=EVAL_NOTE, run_id=run.run_id,
    )
