"""SWE-bench dataset rows as a JSONL file: fetched once on a machine with network access
(``forgetting dataset fetch``), read by instance id (the evaluation's rows, the runner's
problem statements). Light on purpose: the command line's ``--help`` reads its defaults."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from forgetting import config_schema
from forgetting.atomic import atomic_path
from forgetting.errors import ResourceError, UserError
from forgetting.inputs import parse_json, read_text

#: the dataset swebench 5.x's harness evaluates as ``verified``; its rows carry the image,
#: eval script, log parser and evaluation type the docker and apptainer backends need
DEFAULT_DATASET = "SWE-bench/SWE-bench_Verified"
DEFAULT_SPLIT = "test"
#: where ``forgetting dataset fetch`` writes: ``dataset.instances``' default for ``swebench``
DEFAULT_OUT: str = config_schema.section("dataset", {"kind": "swebench"})["instances"]


def read_jsonl_instances(path: Path, wanted: set[str] | None = None) -> dict[str, dict[str, Any]]:
    """Rows of a JSONL file by instance id (only ``wanted`` ones when given)."""
    if not path.is_file():
        raise ResourceError(
            f"{path}: SWE-bench instances file not found (dataset.instances); "
            f"fetch it with `forgetting dataset fetch --out {path}` on a machine with network access"
        )
    rows: dict[str, dict[str, Any]] = {}
    text = read_text(path, what="SWE-bench instances file", error=ResourceError)
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        row = parse_json(line, f"{path}: line {lineno}", error=ResourceError)
        if not isinstance(row, dict) or not isinstance(row.get("instance_id"), str):
            raise ResourceError(f"{path}: line {lineno} is not a dataset row (no instance_id)")
        if wanted is None or row["instance_id"] in wanted:
            rows[row["instance_id"]] = row
    return rows


def fetch_instances(
    out: Path, *, name: str = DEFAULT_DATASET, split: str = DEFAULT_SPLIT
) -> tuple[int, list[str]]:
    """Download a SWE-bench dataset split with the ``datasets`` package and write it to ``out``
    as JSONL (atomically). Returns the row count and the harness fields the rows lack."""
    from forgetting.evaluation.grading import missing_harness_fields  # imports swebench: only a fetch needs it

    try:
        from datasets import load_dataset
    except ImportError:
        raise UserError(
            "dataset fetch: the 'datasets' package is not installed (pip install datasets)"
        ) from None
    try:
        dataset = load_dataset(name, split=split)
    except Exception as exc:  # offline, unknown name, hub errors: all one line
        reason = (str(exc).strip().splitlines() or [""])[0][:200]
        raise UserError(
            f"dataset fetch: cannot download {name} (split {split}) from the Hugging Face hub "
            f"({type(exc).__name__}: {reason}); run it on a machine with network access and copy {out} here"
        ) from None
    rows = [dict(row) for row in dataset]
    with atomic_path(out) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, sort_keys=True, ensure_ascii=False, default=str) + "\n")
    lacking = sorted({f for row in rows for f in missing_harness_fields(row)})
    return len(rows), lacking
