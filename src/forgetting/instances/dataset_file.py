"""SWE-bench dataset rows from a local Parquet or JSONL file or from the Hugging Face hub,
read by instance id into :class:`~forgetting.instances.record.Instance` records
(the evaluation's rows, the runner's problem statements, the task list check).

A file in either schema works: the classic ``princeton-nlp/SWE-bench_Verified`` rows (e.g. the
dataset's own Parquet file) or swebench 5.x's ``SWE-bench/SWE-bench_Verified``, which
``forgetting dataset fetch`` writes as JSONL where the hub is reachable. ``dataset.instances:
hf:NAME`` reads the hub directly (a user's machine). Light on purpose: the command line's
``--help`` reads this module's defaults (pyarrow and datasets are imported when used)."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forgetting.foundation import config_schema
from forgetting.foundation.atomic import atomic_path
from forgetting.foundation.errors import ResourceError, UserError
from forgetting.foundation.inputs import parse_json, read_text
from forgetting.instances.record import Instance, missing_harness_fields, parse_row

#: the dataset swebench 5.x's harness evaluates as ``verified``; its rows carry the image,
#: eval script, log parser and evaluation type the docker and apptainer backends need
DEFAULT_DATASET = "SWE-bench/SWE-bench_Verified"
DEFAULT_SPLIT = "test"
#: where ``forgetting dataset fetch`` writes: ``dataset.instances``' default for ``swebench``
DEFAULT_OUT: str = config_schema.filled({"dataset": {"kind": "swebench"}})["dataset"]["instances"]
#: a file with one of these suffixes is read as Parquet, any other as JSONL
PARQUET_SUFFIXES = (".parquet", ".pq")


#: ``dataset.instances: hf:NAME``: the rows straight from the Hugging Face hub (a user's
#: machine with network access; the ``datasets`` package caches them)
HUB_PREFIX = "hf:"


@dataclass(frozen=True)
class HubDataset:
    """A dataset on the Hugging Face hub (``hf:NAME`` in ``dataset.instances``), one split."""

    name: str
    split: str = DEFAULT_SPLIT

    def __str__(self) -> str:
        return f"{HUB_PREFIX}{self.name} ({self.split})"


#: where the rows come from: a local Parquet or JSONL file, or the hub
DatasetSource = Path | HubDataset


def dataset_source(value: str, *, root: Path, split: str = DEFAULT_SPLIT) -> DatasetSource:
    """``dataset.instances`` as a source: ``hf:NAME`` or a path (relative: against ``root``)."""
    if value.startswith(HUB_PREFIX):
        name = value[len(HUB_PREFIX):].strip()
        if not name:
            raise ResourceError("dataset.instances: hf: names no dataset (e.g. hf:SWE-bench/SWE-bench_Verified)")
        return HubDataset(name, split)
    path = Path(value)
    return path if path.is_absolute() else root / path


@dataclass(frozen=True)
class DatasetSettings:
    """The ``dataset`` section of a loaded study: the kind, where its rows are, the split."""

    kind: str
    #: ``dataset.instances`` as given (its default by ``kind`` is the schema's)
    instances: str
    split: str
    #: ``instances`` as a path against the study's root (the demo's tasks directory, a file)
    path: Path

    @classmethod
    def from_filled(cls, values: Mapping[str, Any], *, root: Path) -> DatasetSettings:
        instances = str(values["instances"])
        path = Path(instances)
        return cls(kind=str(values["kind"]), instances=instances, split=str(values["split"]),
                   path=path if path.is_absolute() else root / path)

    def source(self, root: Path) -> DatasetSource:
        """Where the rows come from: a file, or ``hf:NAME`` (split ``split``)."""
        return dataset_source(self.instances, root=root, split=self.split)


def _parquet_rows(path: Path) -> list[tuple[str, Any]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        reason = (str(exc).strip().splitlines() or [""])[0][:200]
        raise ResourceError(f"{path}: not a readable Parquet file of dataset rows ({reason})") from None
    return [(f"{path} row {i}", row) for i, row in enumerate(table.to_pylist(), 1)]


def _jsonl_rows(path: Path) -> list[tuple[str, Any]]:
    text = read_text(path, what="SWE-bench instances file", error=ResourceError)
    rows = []
    for lineno, line in enumerate(text.split("\n"), 1):
        if line.strip():
            rows.append((f"{path} line {lineno}", parse_json(line, f"{path}: line {lineno}", error=ResourceError)))
    return rows


@functools.lru_cache(maxsize=4)
def _hub_rows(source: HubDataset) -> tuple[tuple[str, Any], ...]:
    try:
        from datasets import load_dataset
    except ImportError:
        raise ResourceError(
            f"dataset.instances {source}: the 'datasets' package is not installed (pip install datasets)"
        ) from None
    try:
        dataset = load_dataset(source.name, split=source.split)
    except Exception as exc:  # offline, unknown name, hub errors: all one line
        reason = (str(exc).strip().splitlines() or [""])[0][:200]
        raise ResourceError(
            f"dataset.instances {source}: cannot load it from the Hugging Face hub ({type(exc).__name__}: "
            f"{reason}); where the hub is unreachable, fetch a file elsewhere with `forgetting dataset fetch "
            "--out FILE` and point dataset.instances at it"
        ) from None
    return tuple((f"{source} row {i}", dict(row)) for i, row in enumerate(dataset, 1))


def read_rows(source: DatasetSource) -> list[tuple[str, Any]]:
    """The raw rows of ``source``, each with where it came from (``FILE row N``)."""
    if isinstance(source, HubDataset):
        return list(_hub_rows(source))
    if source.exists() and not source.is_file():
        raise ResourceError(f"{source}: not a regular file (dataset.instances names a Parquet or JSONL file of rows)")
    if not source.is_file():
        raise ResourceError(
            f"{source}: SWE-bench instances file not found (dataset.instances); fetch it with "
            f"`forgetting dataset fetch --out {source}` on a machine with network access"
        )
    if source.suffix.lower() in PARQUET_SUFFIXES:
        return _parquet_rows(source)
    return _jsonl_rows(source)


def read_instances(source: DatasetSource, wanted: set[str] | None = None) -> dict[str, Instance]:
    """The rows of a dataset file (Parquet, JSONL) or hub dataset by instance id, each parsed
    into an :class:`Instance` (only ``wanted`` ones when given). A malformed row or a duplicate
    id is one :class:`ResourceError` naming the file and the row."""
    rows: dict[str, Instance] = {}
    seen: dict[str, str] = {}
    for where, raw in read_rows(source):
        instance_id = raw.get("instance_id") if isinstance(raw, dict) else None
        if isinstance(instance_id, str) and instance_id in seen:
            raise ResourceError(f"{where}: instance {instance_id!r} again (first at {seen[instance_id]})")
        if isinstance(instance_id, str):
            seen[instance_id] = where
        if wanted is None or instance_id in wanted or not isinstance(instance_id, str):
            instance = parse_row(raw, source=where)
            rows[instance.instance_id] = instance
    return rows


def fetch_instances(
    out: Path, *, name: str = DEFAULT_DATASET, split: str = DEFAULT_SPLIT
) -> tuple[int, list[str]]:
    """Download a SWE-bench dataset split with the ``datasets`` package and write it to ``out``
    (atomically): as Parquet when ``out`` ends in ``.parquet``, else as JSONL. Returns the row
    count and the harness fields the rows lack."""
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
    if out.suffix.lower() in PARQUET_SUFFIXES:  # read back as Parquet (read_rows): written as Parquet
        import pyarrow.parquet as pq

        with atomic_path(out) as tmp:
            pq.write_table(dataset.data.table, tmp)
    else:
        with atomic_path(out) as tmp, open(tmp, "w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, sort_keys=True, ensure_ascii=False, default=str) + "\n")
    lacking = sorted({f for row in rows for f in missing_harness_fields(row)})
    return len(rows), lacking
