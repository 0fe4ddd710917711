"""SWE-bench evaluation of the runs' patches (SPEC §3), graded by swebench's own code.

- :func:`evaluate_batch` — the workflow's entry (``workflow/scripts/evaluate_batch.py``)
- :func:`evaluate_patch` — one patch on one instance into ``eval.json``
- :func:`load_instances` — the dataset rows of a study's tasks
- backends: :mod:`~forgetting.evaluate.docker_harness`, :mod:`~forgetting.evaluate.apptainer`,
  :mod:`~forgetting.evaluate.local`; grading: :mod:`~forgetting.evaluate.grading`

The names are imported on first use, so importing a light submodule (``instances``,
``report``, ``settings``) does not load swebench.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "evaluate_batch": "forgetting.evaluate.batch",
    "evaluate_patch": "forgetting.evaluate.evaluate",
    "load_instances": "forgetting.instances.load",
    "EvalReport": "forgetting.records.eval_report",
    "read_report": "forgetting.records.eval_report",
    "STATUSES": "forgetting.records.eval_report",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
