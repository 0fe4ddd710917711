"""The embedded demo's task registry (``resources/demo/tasks/<instance_id>/instance.json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from forgetting.errors import ResourceError


def demo_task_ids(tasks_dir: Path) -> list[str]:
    """The ids of the demo tasks under ``tasks_dir`` (one directory with an instance.json each)."""
    return sorted(p.parent.name for p in Path(tasks_dir).glob("*/instance.json"))


def load_instance(tasks_dir: Path, instance_id: str) -> dict[str, Any]:
    """A demo task's SWE-bench instance fields."""
    path = Path(tasks_dir) / instance_id / "instance.json"
    if not path.is_file():
        raise ResourceError(f"{path}: no such demo task {instance_id!r}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ResourceError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if data.get("instance_id") != instance_id:
        raise ResourceError(f"{path}: instance_id is {data.get('instance_id')!r}, expected {instance_id!r}")
    return data
