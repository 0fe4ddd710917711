"""Hostile values in the datasets: a count or cost that is negative, NaN or infinite in a run
dataset (``runs``, ``calls``, ``tool_calls``, ``run_costs``, ``timings``) or the plan is
refused where the dataset is read (:func:`forgetting.records.schemas.read_dataset`), with one line
naming the file, the row and the column — before it reaches a table (on main 8c875c1 a
``run_costs`` row with a negative cost gave a report that said ok and a baseline mean cost of
−499.22; a NaN on a secondary profile changed no table).

Each case is counted in the hostile-input summary under its class (``tests/hostile/conftest.py``)."""

from __future__ import annotations

import copy
import math
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from forgetting.foundation.errors import RunOutputError
from forgetting.records.schemas import DATASETS, PLAN_SCHEMA, SIGNED, read_dataset, write_table
from forgetting_testkit.checkout import ROOT
from forgetting_testkit.hostile import changed, run_main, snapshot

CLASS = "dataset value out of range"
BAD = {"negative": -499.0, "NaN": math.nan, "infinite": math.inf}


def _numeric(schema: pa.Schema) -> list[str]:
    return [f.name for f in schema if pa.types.is_integer(f.type) or pa.types.is_floating(f.type)]


def _with_value(table: pa.Table, column: str, row: int, value: float) -> pa.Table:
    i = table.column_names.index(column)
    field = table.schema.field(i)
    values = table.column(column).to_pylist()
    values[row] = int(value) if pa.types.is_integer(field.type) else value
    return table.set_column(i, field, pa.array(values, type=field.type))


def _cases() -> list[tuple[str, str, str]]:
    out = []
    for name, schema in DATASETS.items():
        for column in _numeric(schema):
            if column in SIGNED:
                continue
            floating = pa.types.is_floating(schema.field(column).type)
            for what in BAD if floating else ("negative",):
                out.append((name, column, what))
    return out


@pytest.mark.parametrize(("name", "column", "what"), _cases(), ids=lambda x: str(x))
def test_a_value_out_of_range_is_refused_on_read_naming_file_row_and_column(
    world: Any, tmp_path: Path, tally: Any, name: str, column: str, what: str
) -> None:
    table = pq.read_table(world.study / "datasets" / f"{name}.parquet")
    row = min(3, table.num_rows - 1)
    path = tmp_path / f"{name}.parquet"
    write_table(_with_value(table, column, row, BAD[what]), path)
    with pytest.raises(RunOutputError) as err:
        read_dataset(path, DATASETS[name])
    line = str(err.value)
    assert "\n" not in line
    assert str(path) in line and f"row {row + 1} " in line and f"column {column!r}" in line, line
    tally.count(f"read_dataset {name}", CLASS)


def test_a_signed_column_may_be_negative_and_a_null_count_is_no_value(world: Any, tmp_path: Path) -> None:
    """The server's prompt tokens less the rebuilt ones may be below zero; an unreported count is null."""
    table = pq.read_table(world.study / "datasets" / "runs.parquet")
    table = _with_value(table, "prompt_token_difference", 0, -7)
    i = table.column_names.index("cost_reported")
    table = table.set_column(i, table.schema.field(i), pa.nulls(table.num_rows, pa.float64()))
    write_table(table, tmp_path / "runs.parquet")
    assert read_dataset(tmp_path / "runs.parquet", DATASETS["runs"]).num_rows == table.num_rows


def test_the_plan_is_range_checked_too(tmp_path: Path) -> None:
    from forgetting.study.config import load_study
    from forgetting.study.plan import write_run_table

    write_run_table(load_study(ROOT / "config/demo.yaml"), tmp_path / "planned.parquet")
    table = pq.read_table(tmp_path / "planned.parquet")
    write_table(_with_value(table, "repeat", 1, -1), tmp_path / "plan.parquet")
    with pytest.raises(RunOutputError, match=r"row 2 .*column 'repeat': -1 is negative"):
        read_dataset(tmp_path / "plan.parquet", PLAN_SCHEMA)


def _study_with(world: Any, d: Path, name: str, column: str, value: float, profile: str | None = None) -> Path:
    """A copy of the shared study whose dataset ``name`` has ``value`` in ``column`` (on a row of
    ``profile`` when given); its config."""
    study = d / "study"
    shutil.copytree(world.study, study)
    cfg = yaml.safe_load((study / "study.yaml").read_text())
    cfg = copy.deepcopy(cfg)
    cfg["study"]["results_dir"] = str(study)
    (study / "study.yaml").write_text(yaml.safe_dump(cfg))
    path = study / "datasets" / f"{name}.parquet"
    table = pq.read_table(path)
    rows = table.column("profile").to_pylist() if profile else None
    row = rows.index(profile) if rows else 0
    write_table(_with_value(table, column, row, value), path)
    return study / "study.yaml"


REPORT_CASES = {  # what the issue saw, and one of each dataset the statistics read
    "run_costs cost_cache negative (the primary profile)": ("run_costs", "cost_cache", -499.22, None),
    "run_costs cost_cache NaN on a secondary profile": ("run_costs", "cost_cache", math.nan, "min-prefix"),
    "run_costs prompt_tokens negative": ("run_costs", "prompt_tokens", -1, None),
    "runs cost_flat infinite": ("runs", "cost_flat", math.inf, None),
    "runs n_reads negative": ("runs", "n_reads", -3, None),
    "tool_calls overlap NaN": ("tool_calls", "overlap", math.nan, None),
}


@pytest.mark.parametrize("case", sorted(REPORT_CASES))
def test_the_report_refuses_a_dataset_value_out_of_range(world: Any, tmp_path: Path, tally: Any, case: str) -> None:
    name, column, value, profile = REPORT_CASES[case]
    if profile is not None:
        profiles = set(pq.read_table(world.study / "datasets" / "run_costs.parquet").column("profile").to_pylist())
        assert profile in profiles, profiles
    config = _study_with(world, tmp_path, name, column, value, profile)
    results = config.parent
    before = snapshot(tmp_path, world.study)
    outcome = run_main(["report", str(config), "--only", "stats"])
    outcome.changed = changed(before, snapshot(tmp_path, world.study), [results / "stats", results / "logs"])
    found = tally.record("report", outcome, expect="error", klass=CLASS)
    assert not found, "; ".join(found)
    assert f"{name}.parquet" in outcome.stderr and f"column {column!r}" in outcome.stderr, outcome.stderr
    assert "row " in outcome.stderr, outcome.stderr
