"""What the scripted model knows about each demo task: its problem statement and its
``solution.yaml`` (where to look, which files to read, the fix, the test command).

The model uses this knowledge as a careful engineer uses experience: it knows *what* to
change, but it may only apply an edit once the edit's ``old`` text is visible in a read of
that file in its context (see :mod:`forgetting.demo.scripted.policy`). The format is the shared
contract of ``resources/demo/`` (``DEMO_TASK_FORMAT.md``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from forgetting.foundation.errors import ResourceError


@dataclass(frozen=True)
class Edit:
    """An exact text replacement in one file."""

    path: str
    old: str
    new: str
    why: str


@dataclass(frozen=True)
class ReadSpec:
    """A file to read before editing, optionally a 1-based inclusive line range."""

    path: str
    lines: tuple[int, int] | None = None


@dataclass(frozen=True)
class TaskKnowledge:
    """A demo task's problem statement and ``solution.yaml``: what the fix is about (``summary``),
    the test command, where to look, what to read, the edits, and a wrong first edit (if any)."""

    instance_id: str
    problem_statement: str
    summary: str
    test: str
    locate: tuple[str, ...]
    reads: tuple[ReadSpec, ...]
    edits: tuple[Edit, ...]
    wrong_first: Edit | None = None

    @property
    def edit_paths(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(e.path for e in self.edits))


def _normalize(text: str) -> str:
    return " ".join(text.split())


def _need(mapping: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = mapping.get(key)
    if not isinstance(value, kind) or (isinstance(value, str) and not value.strip()):
        raise ResourceError(f"{where}.{key}: expected a non-empty {kind.__name__}")
    return value


def _require(ok: bool, problem: str) -> None:
    if not ok:
        raise ResourceError(problem)


def _edit(raw: Any, where: str) -> Edit:
    _require(isinstance(raw, Mapping), f"{where}: expected a mapping with path, old, new, why")
    old, new = raw.get("old"), raw.get("new")
    _require(isinstance(old, str) and bool(old), f"{where}.old: expected the exact text to replace")
    _require(isinstance(new, str) and new != old, f"{where}.new: expected replacement text different from old")
    return Edit(_need(raw, "path", str, where), old, new, _need(raw, "why", str, where).strip())


def _read(raw: Any, where: str) -> ReadSpec:
    if isinstance(raw, str):
        return ReadSpec(raw)
    if not isinstance(raw, Mapping):
        raise ResourceError(f"{where}: expected {{path: FILE, lines: [FIRST, LAST]}}")
    path = _need(raw, "path", str, where)
    lines = raw.get("lines")
    if lines is None:
        return ReadSpec(path)
    if (
        not isinstance(lines, Sequence)
        or len(lines) != 2
        or not all(isinstance(n, int) for n in lines)
        or not 1 <= lines[0] <= lines[1]
    ):
        raise ResourceError(f"{where}.lines: expected [FIRST, LAST], 1-based and inclusive")
    return ReadSpec(path, (int(lines[0]), int(lines[1])))


def parse_solution(raw: Any, instance_id: str, problem_statement: str, source: str) -> TaskKnowledge:
    """Check a parsed ``solution.yaml`` and turn it into :class:`TaskKnowledge`."""
    _require(isinstance(raw, Mapping), f"{source}: expected a mapping with summary, locate, read, edits, test")
    locate, reads, edits = raw.get("locate") or [], raw.get("read") or [], raw.get("edits")
    _require(isinstance(locate, list) and all(isinstance(c, str) and c.strip() for c in locate),
             f"{source}: locate: expected a list of shell commands")
    _require(isinstance(reads, list), f"{source}: read: expected a list of {{path, lines}}")
    _require(isinstance(edits, list) and bool(edits),
             f"{source}: edits: expected a non-empty list of {{path, old, new, why}}")
    wrong = raw.get("wrong_first")
    return TaskKnowledge(
        instance_id=instance_id,
        problem_statement=problem_statement,
        summary=_need(raw, "summary", str, source).strip(),
        locate=tuple(c.strip() for c in locate),
        reads=tuple(_read(r, f"{source}: read[{i}]") for i, r in enumerate(reads)),
        edits=tuple(_edit(e, f"{source}: edits[{i}]") for i, e in enumerate(edits)),
        test=_need(raw, "test", str, source).strip(),
        wrong_first=_edit(wrong, f"{source}: wrong_first") if wrong is not None else None,
    )


def load_task(task_dir: Path) -> TaskKnowledge:
    """One demo task's knowledge from ``<task_dir>/instance.json`` and ``solution.yaml``."""
    inst_path, sol_path = task_dir / "instance.json", task_dir / "solution.yaml"
    text = _text_of(inst_path, "missing")
    try:
        instance = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResourceError(f"{inst_path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    statement = instance.get("problem_statement") if isinstance(instance, dict) else None
    _require(isinstance(statement, str) and bool(statement.strip()),
             f"{inst_path}: problem_statement: expected a non-empty string")
    instance_id = str(instance.get("instance_id") or task_dir.name)
    text = _text_of(sol_path, "missing; the scripted model needs it for every task")
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ResourceError(f"{sol_path}: not valid YAML ({exc})") from None
    return parse_solution(raw, instance_id, statement, str(sol_path))


def _text_of(path: Path, missing: str) -> str:
    """The text of ``path``; a ResourceError saying ``missing`` when there is none."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ResourceError(f"{path}: {missing}") from None


class TaskBook:
    """Every task the model knows, matched by problem statement."""

    def __init__(self, tasks: Sequence[TaskKnowledge]) -> None:
        self.tasks = tuple(tasks)
        # longest statement first, so a statement that contains another wins
        self._by_statement = sorted(
            ((_normalize(t.problem_statement), t) for t in self.tasks), key=lambda p: -len(p[0])
        )

    @classmethod
    def load(cls, tasks_dir: str | Path) -> TaskBook:
        root = Path(tasks_dir)
        if not root.is_dir():
            raise ResourceError(
                f"{root}: no such tasks directory (expected <id>/instance.json + solution.yaml)"
            )
        dirs = sorted(p.parent for p in root.glob("*/instance.json"))
        if not dirs:
            raise ResourceError(f"{root}: no tasks (expected <id>/instance.json + solution.yaml)")
        return cls([load_task(d) for d in dirs])

    def identify(self, task_text: str) -> TaskKnowledge | None:
        """The task whose problem statement appears in ``task_text`` (the agent's task message)."""
        text = _normalize(task_text)
        for statement, task in self._by_statement:
            if statement and statement in text:
                return task
        return None


_WORD = re.compile(r"\w+")


def words(text: str) -> list[str]:
    return _WORD.findall(text)
