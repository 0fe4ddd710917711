"""One dataset row, parsed once: :class:`Instance`, and what each stage needs of it.

SWE-bench Verified comes in two schemas. The *classic* one (``princeton-nlp/SWE-bench_Verified``:
``repo, instance_id, base_commit, patch, test_patch, problem_statement, hints_text, created_at,
version, FAIL_TO_PASS, PASS_TO_PASS, environment_setup_commit, difficulty``) and the
*swebench-5* one (``SWE-bench/SWE-bench_Verified``), which adds what swebench 5.x's harness
reads in ``make_test_spec``: ``image``, ``eval_script``, ``log_parser``, ``eval_type``. The
test lists are JSON text on the hub and lists elsewhere; both are read. The demo tasks'
``instance.json`` rows are a third source with the classic fields.

Every row is parsed here into an :class:`Instance`: typed attributes for the pipeline's own
code, and — because swebench's functions take a dataset row — the row itself as a read-only
mapping (``instance["FAIL_TO_PASS"]`` is a list). A wrongly typed field is one error naming
the file, the row and the field; a field a stage needs but the row lacks is one error naming
the row, the field and the stage (:func:`require`), before that stage starts any work.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from forgetting.foundation.errors import ResourceError

CLASSIC = "classic"
SWEBENCH5 = "swebench-5"
DEMO = "demo"

#: the text columns of a SWE-bench row (classic and swebench-5 alike)
TEXT_FIELDS = (
    "repo", "base_commit", "patch", "test_patch", "problem_statement", "hints_text", "created_at",
    "version", "environment_setup_commit", "difficulty",
)
TEST_LIST_FIELDS = ("FAIL_TO_PASS", "PASS_TO_PASS")
#: the columns swebench 5.x reads from a row to run and grade it (``make_test_spec``); classic
#: rows lack them
HARNESS_FIELDS = ("image", "eval_script", "log_parser", "eval_type")

#: the dataset that carries the harness fields, and how to get it
SWEBENCH5_DATASET = "SWE-bench/SWE-bench_Verified"
LOAD_SWEBENCH5 = (
    f"load {SWEBENCH5_DATASET} instead (dataset.instances: hf:{SWEBENCH5_DATASET}, or a file "
    "from `forgetting dataset fetch --out FILE`)"
)

#: what each stage reads from a row (beyond ``instance_id``)
STAGE_FIELDS: dict[str, tuple[str, ...]] = {
    "the agent run": ("problem_statement",),
    "the task list check": ("repo",),
    "grading": ("repo", "version", *TEST_LIST_FIELDS),
    # the docker and apptainer evaluation: HARNESS_FIELDS (grading.require_harness_fields)
}


@dataclass(frozen=True, eq=False)
class Instance(Mapping[str, Any]):
    """One dataset row. Absent fields are ``None``; ``source`` says where the row came from
    (``FILE row N``), for error messages."""

    instance_id: str
    source: str
    schema: str
    repo: str | None = None
    base_commit: str | None = None
    patch: str | None = None
    test_patch: str | None = None
    problem_statement: str | None = None
    version: str | None = None
    fail_to_pass: tuple[str, ...] | None = None
    pass_to_pass: tuple[str, ...] | None = None
    image: str | None = None
    eval_script: str | None = None
    log_parser: str | None = None
    eval_type: str | None = None
    #: the row as swebench's functions read it (test lists as lists)
    row: Mapping[str, Any] = field(default_factory=dict, repr=False)

    # the row as a mapping: swebench's make_test_spec, the docker harness's instances file
    def __getitem__(self, key: str) -> Any:
        return self.row[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.row)

    def __len__(self) -> int:
        return len(self.row)

    def lacking(self, stage: str) -> list[str]:
        """The fields ``stage`` needs that this row lacks (empty or absent)."""
        return [f for f in STAGE_FIELDS[stage] if self.row.get(f) in (None, "")]


def _test_list(value: Any, where: str, name: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ResourceError(f"{where}: {name}: not a JSON list of test ids ({exc.msg})") from None
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ResourceError(f"{where}: {name}: expected a list of test ids (strings), got {type(value).__name__}")
    return tuple(value)


def parse_row(raw: Any, *, source: str, schema: str | None = None) -> Instance:
    """One row of a dataset file (``source``: ``FILE row N``) as an :class:`Instance`.

    ``schema`` defaults to what the row shows: swebench-5 when it carries any harness field."""
    if not isinstance(raw, Mapping):
        raise ResourceError(f"{source}: not a dataset row (expected an object, got {type(raw).__name__})")
    instance_id = raw.get("instance_id")
    if not isinstance(instance_id, str) or not instance_id:
        raise ResourceError(f"{source}: instance_id: missing or not a string; is this a SWE-bench dataset file?")
    where = f"{source} ({instance_id})"
    values: dict[str, Any] = {}
    for name in (*TEXT_FIELDS, *HARNESS_FIELDS):
        value = raw.get(name)
        if value is not None and not isinstance(value, str):
            raise ResourceError(f"{where}: {name}: expected a string, got {type(value).__name__}")
        values[name] = value
    tests = {name: _test_list(raw.get(name), where, name) for name in TEST_LIST_FIELDS}
    row = {str(k): v for k, v in raw.items()}
    for name, ids in tests.items():
        if ids is not None:
            row[name] = list(ids)
    if schema is None:
        schema = SWEBENCH5 if any(values[f] for f in HARNESS_FIELDS) else CLASSIC
    return Instance(
        instance_id=instance_id, source=source, schema=schema,
        repo=values["repo"], base_commit=values["base_commit"], patch=values["patch"],
        test_patch=values["test_patch"], problem_statement=values["problem_statement"],
        version=values["version"], fail_to_pass=tests["FAIL_TO_PASS"], pass_to_pass=tests["PASS_TO_PASS"],
        image=values["image"], eval_script=values["eval_script"], log_parser=values["log_parser"],
        eval_type=values["eval_type"], row=row,
    )


def missing_harness_fields(instance: Mapping[str, Any]) -> list[str]:
    """The harness fields (:data:`HARNESS_FIELDS`) a dataset row lacks or leaves empty."""
    return [f for f in HARNESS_FIELDS if not instance.get(f)]


def lacking_message(instance_id: str, row: Mapping[str, Any], fields: list[str], stage: str) -> str:
    """One line: which row lacks which fields, which stage needs them, and what to do."""
    where = f"{row.source}: " if isinstance(row, Instance) else ""
    schema = row.schema if isinstance(row, Instance) else None
    message = f"{where}instance {instance_id}: its dataset row lacks {', '.join(fields)}, which {stage} needs"
    if any(f in HARNESS_FIELDS for f in fields):
        kind = "a classic (princeton-nlp) row" if schema in (CLASSIC, None) else f"a {schema} row"
        message += f"; this is {kind} without swebench 5.x's harness fields: {LOAD_SWEBENCH5}"
    return message


def require(instances: Mapping[str, Instance], stage: str) -> None:
    """A one-line :class:`ResourceError` naming the first row that lacks what ``stage`` needs."""
    for instance_id, instance in instances.items():
        lacking = instance.lacking(stage)
        if lacking:
            raise ResourceError(lacking_message(instance_id, instance, lacking, stage))
