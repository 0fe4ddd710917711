"""A finished run's record, ``run.json``: the one place it is built, written and read.

The runner (:mod:`forgetting.runner.batch`) and the synthetic-study generator build a
:class:`RunRecord` and write it with :func:`write_run_record`; every stage that reads a run's
outcome reads it with :func:`read_run_record`, which checks every field once (a missing or
wrongly typed field is one :class:`~forgetting.errors.RunOutputError` line naming the file and
the field). The presence of ``run.json`` marks a finished run (:func:`is_finished`).

``model_backend`` says what produced the run: ``vllm``, ``scripted`` (the demo's stand-in) or
:data:`SYNTHETIC_BACKEND` — the one marker of a synthetic run (``forgetting synth``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forgetting.atomic import write_text
from forgetting.errors import RunOutputError
from forgetting.grid import Deletion
from forgetting.layout import RUN_JSON
from forgetting.records.fields import Fields

if TYPE_CHECKING:
    from forgetting.plan import Run

#: how a finished run can end (SPEC §3)
RUN_STATUSES: tuple[str, ...] = ("submitted", "capped", "context_exceeded", "error")
#: ``model_backend`` of a run made by the synthetic-study generator: the one synthetic marker
SYNTHETIC_BACKEND = "synthetic"

_HINT = "rerun this run"
_DELETION_FIELDS = frozenset({"name", "policy", "scope", "granularity", "amount", "keep_last", "timing", "params"})


def is_finished(run_dir: Path) -> bool:
    """A run is finished when its ``run.json`` exists (it is written last)."""
    return (Path(run_dir) / RUN_JSON).is_file()


@dataclass(frozen=True)
class RunRecord:
    """What ``run.json`` holds (docs/runs.md)."""

    run_id: str
    agent: str
    configuration: str
    task: str
    repeat: int
    seed: int
    deletion: Deletion
    status: str  # one of RUN_STATUSES
    exit_status: str  # the agent's own word (Submitted, LimitsExceeded, …)
    turns: int  # model calls answered
    turn_cap: int
    agent_calls: int | None  # the agent's own count of its calls
    started: float  # unix seconds
    wall_s: float
    model_s: float | None  # seconds waiting for the model (from the call log)
    agent_exit_code: int | None
    patch_bytes: int
    error: str | None
    model_backend: str
    versions: Mapping[str, Any]  # agent, model, pipeline (free-form provenance)

    @property
    def synthetic(self) -> bool:
        """Made by the synthetic-study generator, not by an agent."""
        return self.model_backend == SYNTHETIC_BACKEND

    @classmethod
    def for_run(
        cls,
        run: Run,
        *,
        status: str,
        exit_status: str,
        turns: int,
        turn_cap: int,
        agent_calls: int | None,
        started: float,
        wall_s: float,
        model_s: float | None,
        agent_exit_code: int | None,
        patch_bytes: int,
        error: str | None,
        model_backend: str,
        versions: Mapping[str, Any],
    ) -> RunRecord:
        """The record of a planned run: its identity from the plan, the rest as given."""
        return cls(
            run_id=run.run_id,
            agent=run.agent,
            configuration=run.configuration,
            task=run.task,
            repeat=run.repeat,
            seed=run.seed,
            deletion=run.deletion,
            status=status,
            exit_status=exit_status,
            turns=turns,
            turn_cap=turn_cap,
            agent_calls=agent_calls,
            started=started,
            wall_s=wall_s,
            model_s=model_s,
            agent_exit_code=agent_exit_code,
            patch_bytes=patch_bytes,
            error=error,
            model_backend=model_backend,
            versions=versions,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "agent": self.agent,
            "configuration": self.configuration,
            "task": self.task,
            "repeat": self.repeat,
            "seed": self.seed,
            "deletion": self.deletion.as_dict(),
            "status": self.status,
            "exit_status": self.exit_status,
            "turns": self.turns,
            "turn_cap": self.turn_cap,
            "agent_calls": self.agent_calls,
            "started": self.started,
            "wall_s": self.wall_s,
            "model_s": self.model_s,
            "agent_exit_code": self.agent_exit_code,
            "patch_bytes": self.patch_bytes,
            "error": self.error,
            "model_backend": self.model_backend,
            "versions": dict(self.versions),
        }

    def to_json(self) -> str:
        """The bytes of ``run.json`` (sorted keys, so equal records give equal files)."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, data: Any, source: Path) -> RunRecord:
        """Check a parsed ``run.json`` field by field (see the module docstring)."""
        f = Fields.of(data, source, hint=_HINT)
        f.unknown(_RECORD_FIELDS)
        status = f.string("status", required=True, null=False)
        if status not in RUN_STATUSES:
            raise RunOutputError(
                f"{source}: status {status!r} is not a run outcome ({', '.join(RUN_STATUSES)}); {_HINT}"
            )
        turns = f.integer("turns", required=True, null=False)
        assert turns is not None
        if turns < 0:
            raise RunOutputError(f"{source}: turns {turns!r} is not a count of model calls; {_HINT}")
        versions = f.mapping("versions", required=True, null=False)
        return cls(
            run_id=_str(f, "run_id"),
            agent=_str(f, "agent"),
            configuration=_str(f, "configuration"),
            task=_str(f, "task"),
            repeat=_int(f, "repeat"),
            seed=_int(f, "seed"),
            deletion=_deletion(f),
            status=status,
            exit_status=_str(f, "exit_status"),
            turns=turns,
            turn_cap=_int(f, "turn_cap"),
            agent_calls=f.integer("agent_calls", required=True),
            started=_float(f, "started"),
            wall_s=_float(f, "wall_s"),
            model_s=_opt_float(f, "model_s"),
            agent_exit_code=f.integer("agent_exit_code", required=True),
            patch_bytes=_int(f, "patch_bytes"),
            error=f.string("error", required=True),
            model_backend=_str(f, "model_backend"),
            versions=dict(versions or {}),
        )


_RECORD_FIELDS = frozenset(RunRecord.__dataclass_fields__)


def _str(f: Fields, key: str) -> str:
    value = f.string(key, required=True, null=False)
    assert value is not None
    return value


def _int(f: Fields, key: str) -> int:
    value = f.integer(key, required=True, null=False)
    assert value is not None
    return value


def _float(f: Fields, key: str) -> float:
    value = f.number(key, required=True, null=False)
    assert value is not None
    return value  # an int stays an int: the record writes back what it read


def _opt_float(f: Fields, key: str) -> float | None:
    return f.number(key, required=True)


def _deletion(f: Fields) -> Deletion:
    d = f.obj("deletion", required=True, null=False)
    assert d is not None
    d.unknown(_DELETION_FIELDS)
    params = d.mapping("params", required=True, null=False)
    return Deletion(
        name=_str(d, "name"),
        policy=_str(d, "policy"),
        scope=d.string("scope", required=True),
        granularity=d.string("granularity", required=True),
        amount=d.number("amount", required=True),  # type: ignore[arg-type]
        keep_last=_int(d, "keep_last"),
        timing=d.string("timing", required=True),
        params=dict(params or {}),
    )


def read_run_record(path: str | os.PathLike[str]) -> RunRecord:
    """The record in ``path`` (a ``run.json``): missing, not JSON or a bad field is one error line."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RunOutputError(f"{p}: run record not found; the run has not finished") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RunOutputError(f"{p}: run record is not readable ({exc.__class__.__name__}); {_HINT}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise RunOutputError(f"{p}: run record is not readable JSON ({exc}); {_HINT}") from None
    return RunRecord.from_json(data, p)


def write_run_record(path: str | os.PathLike[str], record: RunRecord) -> int:
    """Write ``record`` atomically to ``path``; returns the bytes written."""
    text = record.to_json()
    write_text(path, text)
    return len(text.encode("utf-8"))
