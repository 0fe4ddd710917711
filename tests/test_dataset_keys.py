"""Declared keys (issue 15, item 4): a dataset with two rows for one key, or rows of runs the study
does not have, is an error naming the file, the key and an example — never counted twice."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from forgetting.foundation.errors import RunOutputError
from forgetting.foundation.layout import Layout
from forgetting.records.schemas import (
    CALLS_SCHEMA,
    DATASETS,
    PLAN_SCHEMA,
    key_of,
    read_dataset,
    write_dataset,
    write_table,
)
from forgetting.report.collect import collect
from forgetting.report.stats.schemas import STATS
from forgetting.study.plan import plan_batches
from forgetting_testkit.stats_study import make_study


@pytest.fixture
def collected(tmp_path):
    study = make_study(tmp_path, n_tasks=4)
    collect(study)
    return study


def test_every_dataset_declares_its_key():
    keys = {name: key_of(schema) for name, schema in {**DATASETS, **STATS}.items()}
    assert keys == {
        "runs": ("run_id",),
        "calls": ("run_id", "call"),
        "tool_calls": ("run_id", "turn", "index"),
        "run_costs": ("run_id", "profile"),
        "timings": ("run_id",),
        "effects": ("agent", "configuration", "metric"),
        "comparisons": ("agent", "comparison", "first", "second", "metric"),
        "summary": ("agent", "configuration"),
        "cache_validation": ("agent", "configuration", "profile"),
    }
    assert key_of(PLAN_SCHEMA) == ("run_id",)


def test_report_refuses_a_runs_dataset_with_every_row_twice(collected, run_cli):
    path = Layout(collected.results_dir).dataset("runs")
    runs = pq.read_table(path)
    write_table(pa.concat_tables([runs, runs]), path)
    proc = run_cli("report", collected.source)
    assert proc.returncode == 2, proc.stdout
    (line,) = proc.stderr.strip().splitlines()
    first = runs.column("run_id")[0].as_py()
    assert line == (
        f"error: {path}: duplicate key (run_id): {first!r} is in 2 rows ({runs.num_rows} key(s) duplicated, "
        f"{runs.num_rows} extra row(s)); regenerate it (delete it and rerun its stage)"
    )
    assert not Layout(collected.results_dir).stats.exists()


def test_read_and_write_refuse_a_duplicate_or_null_key(tmp_path):
    rows = [{"run_id": "a/b/c/1", "call": 1}, {"run_id": "a/b/c/1", "call": 2}, {"run_id": "a/b/c/1", "call": 2}]
    table = pa.Table.from_pylist([{**dict.fromkeys(CALLS_SCHEMA.names), **r} for r in rows], schema=CALLS_SCHEMA)
    out = tmp_path / "calls.parquet"
    with pytest.raises(RunOutputError, match=r"duplicate key \(run_id, call\): \('a/b/c/1', 2\) is in 2 rows"):
        write_dataset(table, out, CALLS_SCHEMA)
    assert not out.exists()  # nothing written
    write_table(table, out)
    with pytest.raises(RunOutputError, match=rf"^{out}: duplicate key \(run_id, call\)"):
        read_dataset(out, CALLS_SCHEMA)
    write_dataset(table.slice(0, 2), out, CALLS_SCHEMA)  # distinct keys: fine
    assert read_dataset(out, CALLS_SCHEMA).num_rows == 2
    nulls = table.set_column(1, "call", pa.array([1, None, 3], pa.int32()))
    with pytest.raises(RunOutputError, match="key column 'call' is null in 1 row"):
        write_dataset(nulls, out, CALLS_SCHEMA)


@pytest.mark.parametrize("name", ["tool_calls", "run_costs"])
def test_statistics_refuse_rows_of_a_run_the_runs_dataset_lacks(collected, run_cli, name):
    path = Layout(collected.results_dir).dataset(name)
    table = pq.read_table(path)
    first = table.slice(0, 1)
    stray = first.set_column(0, "run_id", pa.array(["mini/baseline/nowhere__task-1/1"]))
    write_table(pa.concat_tables([table, stray]), path)
    proc = run_cli("report", collected.source, "--only", "stats")
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"error: {name} dataset: 1 run id(s) that are not in the runs dataset "
        "(e.g. 'mini/baseline/nowhere__task-1/1'); collect the datasets again"
    )


def test_statistics_refuse_a_runs_dataset_of_another_plan(collected, run_cli):
    path = Layout(collected.results_dir).dataset("runs")
    runs = pq.read_table(path)
    last = runs.column("run_id")[runs.num_rows - 1].as_py()
    write_table(runs.slice(0, runs.num_rows - 1), path)
    proc = run_cli("report", collected.source, "--only", "stats")
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"error: runs dataset: 1 planned run(s) without a row (e.g. {last!r}); collect the datasets again"
    )
    foreign = runs.slice(0, 1).set_column(0, "run_id", pa.array(["trae/baseline/elsewhere__x-1/9"]))
    write_table(pa.concat_tables([runs, foreign]), path)
    proc = run_cli("report", collected.source, "--only", "stats")
    assert proc.stderr.strip().startswith(
        "error: runs dataset: 1 run(s) that are not in the study's plan (e.g. 'trae/baseline/elsewhere__x-1/9')"
    )


def _batch(study, agent: str, configuration: str):
    batch = next(b for b in plan_batches(study) if b.agent == agent and b.configuration == configuration)
    return Layout(study.results_dir).batch_dir(batch.key), batch


def test_collect_names_each_run_of_a_batch_file_with_a_duplicate_key(tmp_path):
    study = make_study(tmp_path, n_tasks=4)
    d, batch = _batch(study, "mini", "baseline")
    calls = pq.read_table(d / "calls.parquet")
    write_table(pa.concat_tables([calls, calls.slice(3, 1)]), d / "calls.parquet")
    log = tmp_path / "collect.log"
    with pytest.raises(RunOutputError, match=f"{len(batch.runs)} of"):
        collect(study, log=log)
    lines = [line for line in log.read_text().splitlines() if line.startswith("missing run ")]
    assert [line.split()[2].rstrip(":") for line in lines] == [r.run_id for r in batch.runs]
    assert f"{d / 'calls.parquet'}: duplicate key (run_id, call)" in lines[0]


def test_collect_refuses_a_batch_file_holding_a_run_of_another_batch(tmp_path):
    """Before, such a row was logged as a warning and dropped."""
    study = make_study(tmp_path, n_tasks=4)
    d, batch = _batch(study, "mini", "baseline")
    other_d, _ = _batch(study, "trae", "baseline")
    summary = pq.read_table(d / "summary.parquet")
    foreign = pq.read_table(other_d / "summary.parquet").slice(0, 1)
    write_table(pa.concat_tables([summary, foreign]), d / "summary.parquet")
    log = tmp_path / "collect.log"
    with pytest.raises(RunOutputError):
        collect(study, log=log)
    text = log.read_text()
    stray = foreign.column("run_id")[0].as_py()
    assert f"missing run {batch.runs[0].run_id}: {d / 'summary.parquet'}: run {stray} is not in this batch's plan" \
        in text
