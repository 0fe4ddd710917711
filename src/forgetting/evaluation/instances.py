"""The dataset rows an evaluation needs: SWE-bench Verified (JSONL) or the demo tasks.

For ``dataset.kind: swebench`` the rows come from ``dataset.instances``, a JSONL file of
dataset rows fetched once on a machine with network access (``forgetting dataset fetch``;
:mod:`forgetting.evaluation.dataset_file`).
For ``dataset.kind: demo`` they are the demo tasks' ``instance.json`` files.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from forgetting.config import Study
from forgetting.demo.tasks import load_instance
from forgetting.errors import ResourceError
from forgetting.evaluation.dataset_file import read_jsonl_instances


def instances_path(study: Study) -> Path:
    """``dataset.instances`` (its default by ``dataset.kind`` is the schema's)."""
    return study.path(study.section("dataset")["instances"])


def load_instances(study: Study, ids: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
    """The dataset rows of ``ids`` (default: the study's tasks), by instance id.

    A missing file or id is a one-line :class:`ResourceError` naming the file and the id.
    """
    wanted = list(dict.fromkeys(study.tasks if ids is None else ids))
    path = instances_path(study)
    if study.raw["dataset"]["kind"] == "demo":
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
