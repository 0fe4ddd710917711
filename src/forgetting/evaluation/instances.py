"""The dataset rows an evaluation needs: SWE-bench Verified (JSONL) or the demo tasks.

For ``dataset.kind: swebench`` the rows come from ``dataset.instances``, a JSONL file of
dataset rows fetched once on a machine with network access (``forgetting dataset fetch``).
For ``dataset.kind: demo`` they are the demo tasks' ``instance.json`` files.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from forgetting import config_schema
from forgetting.atomic import atomic_path
from forgetting.config import Study
from forgetting.errors import ResourceError, UserError

#: the dataset swebench 5.x's harness evaluates as ``verified``; its rows carry the image,
#: eval script, log parser and evaluation type the docker and apptainer backends need
DEFAULT_DATASET = "SWE-bench/SWE-bench_Verified"
DEFAULT_SPLIT = "test"
#: where ``forgetting dataset fetch`` writes: ``dataset.instances``' default for ``swebench``
DEFAULT_OUT: str = config_schema.section("dataset", {"kind": "swebench"})["instances"]


def instances_path(study: Study) -> Path:
    """``dataset.instances`` (its default by ``dataset.kind`` is the schema's)."""
    return study.path(study.section("dataset")["instances"])


def read_jsonl_instances(path: Path, wanted: set[str] | None = None) -> dict[str, dict[str, Any]]:
    """Rows of a JSONL file by instance id (only ``wanted`` ones when given)."""
    if not path.is_file():
        raise ResourceError(
            f"{path}: SWE-bench instances file not found (dataset.instances); "
            f"fetch it with `forgetting dataset fetch --out {path}` on a machine with network access"
        )
    from forgetting.inputs import read_text

    rows: dict[str, dict[str, Any]] = {}
    text = read_text(path, what="SWE-bench instances file", error=ResourceError)
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ResourceError(f"{path}: line {lineno} is not valid JSON ({exc.msg})") from None
        except RecursionError:
            raise ResourceError(f"{path}: line {lineno} is nested too deeply to read") from None
        if not isinstance(row, dict) or not isinstance(row.get("instance_id"), str):
            raise ResourceError(f"{path}: line {lineno} is not a dataset row (no instance_id)")
        if wanted is None or row["instance_id"] in wanted:
            rows[row["instance_id"]] = row
    return rows


def load_instances(study: Study, ids: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
    """The dataset rows of ``ids`` (default: the study's tasks), by instance id.

    A missing file or id is a one-line :class:`ResourceError` naming the file and the id.
    """
    wanted = list(dict.fromkeys(study.tasks if ids is None else ids))
    path = instances_path(study)
    if study.raw["dataset"]["kind"] == "demo":
        from forgetting.demo.tasks import load_instance

        return {i: load_instance(path, i) for i in wanted}
    rows = read_jsonl_instances(path, set(wanted))
    missing = [i for i in wanted if i not in rows]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ResourceError(
            f"{path}: no instance {missing[0]!r}{more}; is dataset.instances the SWE-bench Verified file?"
        )
    return {i: rows[i] for i in wanted}


def load_available(study: Study, ids: Iterable[str]) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Like :func:`load_instances`, but an id the dataset lacks (or a demo task that cannot be
    read) does not fail the call: it comes back in the second mapping with its one-line reason,
    so the runs of the other tasks can still be evaluated. A missing or corrupt dataset file is
    still an error for all."""
    wanted = list(dict.fromkeys(ids))
    path = instances_path(study)
    rows: dict[str, dict[str, Any]] = {}
    missing: dict[str, str] = {}
    if study.raw["dataset"]["kind"] == "demo":
        from forgetting.demo.tasks import load_instance

        for i in wanted:
            try:
                rows[i] = load_instance(path, i)
            except ResourceError as exc:
                missing[i] = str(exc)
        return rows, missing
    found = read_jsonl_instances(path, set(wanted))
    for i in wanted:
        if i in found:
            rows[i] = found[i]
        else:
            missing[i] = f"{path}: no instance {i!r}; is dataset.instances the SWE-bench Verified file?"
    return rows, missing


def fetch_instances(
    out: Path, *, name: str = DEFAULT_DATASET, split: str = DEFAULT_SPLIT
) -> tuple[int, list[str]]:
    """Download a SWE-bench dataset split with the ``datasets`` package and write it to ``out``
    as JSONL (atomically). Returns the row count and the harness fields the rows lack."""
    from forgetting.evaluation.grading import missing_harness_fields

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
