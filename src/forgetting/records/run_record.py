"""A finished run's record, ``run.json``: the one place it is built, written and read.

The runner (:mod:`forgetting.run.batch`) and the synthetic-study generator build a
:class:`RunRecord` and write it with :func:`write_run_record`; every stage that reads a run's
outcome reads it with :func:`read_run_record`, which checks every field once (a missing or
wrongly typed field is one :class:`~forgetting.foundation.errors.RunOutputError` line naming the file and
the field). The presence of ``run.json`` marks a finished run (:func:`is_finished`).

``model_backend`` says what produced the run: ``vllm``, ``scripted`` (the demo's stand-in) or
:data:`SYNTHETIC_BACKEND` — the one marker of a synthetic run (``forgetting synth``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Protocol

from forgetting.foundation.atomic import write_text
from forgetting.foundation.errors import RunOutputError
from forgetting.foundation.inputs import check_stored, read_stored
from forgetting.foundation.layout import RUN_JSON
from forgetting.grid import Deletion
from forgetting.records.fields import Fields

#: how a finished run can end (SPEC §3)
RUN_STATUSES: tuple[str, ...] = ("submitted", "capped", "context_exceeded", "error")
#: ``model_backend`` of a run made by the synthetic-study generator: the one synthetic marker
SYNTHETIC_BACKEND = "synthetic"

_HINT = "rerun this run"


class PlannedRun(Protocol):
    """A run of the plan (:class:`forgetting.study.plan.Run`): its identity columns and its deletion."""

    @property
    def deletion(self) -> Deletion: ...

    def identity(self) -> dict[str, Any]: ...


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
    def for_run(cls, run: PlannedRun, **outcome: Any) -> RunRecord:
        """The record of a planned run: its identity from the plan, every other field (status
        … versions) given by name."""
        columns = run.identity()
        identity = {k: columns[k] for k in ("run_id", "agent", "configuration", "task", "repeat", "seed")}
        return cls(**identity, deletion=run.deletion, **outcome)

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        return {**data, "deletion": self.deletion.as_dict(), "versions": dict(self.versions)}

    def to_json(self) -> str:
        """The bytes of ``run.json`` (sorted keys, so equal records give equal files)."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, data: Any, source: Path) -> RunRecord:
        """Check a parsed ``run.json`` field by field (see the module docstring)."""
        f = Fields.of(data, source, hint=_HINT)
        f.unknown(set(_KINDS) | {"deletion"})
        values = {key: _field(f, key, kind, null) for key, (kind, null) in _KINDS.items()}
        if values["status"] not in RUN_STATUSES:
            raise RunOutputError(
                f"{source}: status {values['status']!r} is not a run outcome ({', '.join(RUN_STATUSES)}); {_HINT}"
            )
        if values["turns"] < 0:
            raise RunOutputError(f"{source}: turns {values['turns']!r} is not a count of model calls; {_HINT}")
        return cls(**values, deletion=_deletion(f))


#: a field's annotation → the JSON kind it is read as (:class:`Fields`' method of that name)
_JSON_KINDS = {"str": "string", "int": "integer", "float": "number", "Mapping[str, Any]": "mapping"}


def _kinds(cls: type, *, skip: tuple[str, ...] = ()) -> dict[str, tuple[str, bool]]:
    """Each field of dataclass ``cls`` but ``skip``: (its JSON kind, whether it may be null)."""
    out = {}
    for f in fields(cls):
        if f.name in skip:
            continue
        annotation = str(f.type)
        base = annotation.removesuffix(" | None")
        if base not in _JSON_KINDS:
            raise TypeError(f"{cls.__name__}.{f.name}: {annotation} is no JSON kind the run record reads")
        out[f.name] = (_JSON_KINDS[base], base != annotation)
    return out


_KINDS = _kinds(RunRecord, skip=("deletion",))
_DELETION_KINDS = _kinds(Deletion)


def _field(f: Fields, key: str, kind: str, null: bool) -> Any:
    """A required field of ``kind`` (an int stays an int where a number is asked for: the
    record writes back what it read); a mapping is copied."""
    value = getattr(f, kind)(key, required=True, null=null)
    return dict(value) if kind == "mapping" else value


def _deletion(f: Fields) -> Deletion:
    d = f.obj("deletion", required=True, null=False)
    assert d is not None
    d.unknown(set(_DELETION_KINDS))
    return Deletion(**{key: _field(d, key, kind, null) for key, (kind, null) in _DELETION_KINDS.items()})


def read_run_record(path: str | os.PathLike[str]) -> RunRecord:
    """The record in ``path`` (a ``run.json``): missing, not JSON or a bad field is one error line."""
    p = Path(path)
    if not os.path.lexists(p):
        raise RunOutputError(f"{p}: run record not found; the run has not finished")
    check_stored(p)  # a link is never followed out of the run directory
    try:
        text = read_stored(p, what="run record").decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RunOutputError(f"{p}: run record is not readable ({exc.__class__.__name__}); {_HINT}") from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise RunOutputError(f"{p}: run record is not readable JSON ({exc}); {_HINT}") from None
    return RunRecord.from_json(data, p)


def write_run_record(path: str | os.PathLike[str], record: RunRecord) -> int:
    """Write ``record`` atomically to ``path``; returns the bytes written."""
    text = record.to_json()
    write_text(path, text)
    return len(text.encode("utf-8"))
