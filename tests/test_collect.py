"""Collection: batch tables into the study's datasets; missing and corrupt runs named, never dropped."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from forgetting.foundation.errors import RunOutputError
from forgetting.foundation.layout import Layout
from forgetting.records.schemas import DATASETS, read_dataset, write_table
from forgetting.report.collect import collect
from forgetting.study.config import load_study
from forgetting.study.plan import plan_batches, plan_runs
from forgetting_testkit.stats_study import make_study, write_batches, write_config


@pytest.fixture
def study(tmp_path):
    return make_study(tmp_path, n_tasks=4)


def _batch_dir(study, agent: str, configuration: str):
    batch = next(b for b in plan_batches(study) if b.agent == agent and b.configuration == configuration)
    return Layout(study.results_dir).batch_dir(batch.key), batch


def test_collects_every_planned_run_into_the_declared_datasets_in_plan_order(study, tmp_path):
    report = collect(study, log=tmp_path / "collect.log")
    planned = [r.run_id for r in plan_runs(study)]
    assert (report.planned, report.collected, report.missing) == (len(planned), len(planned), [])
    layout = Layout(study.results_dir)
    for name, schema in DATASETS.items():
        table = read_dataset(layout.dataset(name), schema)
        assert table.schema.equals(schema), name
    runs = read_dataset(layout.dataset("runs"))
    assert runs.column("run_id").to_pylist() == planned
    calls = read_dataset(layout.dataset("calls"))
    keys = list(zip(calls.column("run_id").to_pylist(), calls.column("call").to_pylist(), strict=True))
    order = {rid: i for i, rid in enumerate(planned)}
    assert keys == sorted(keys, key=lambda k: (order[k[0]], k[1]))
    first = {n: layout.dataset(n).read_bytes() for n in DATASETS}
    collect(study)  # again: byte-identical
    assert {n: layout.dataset(n).read_bytes() for n in DATASETS} == first


def test_a_run_missing_from_its_batch_is_named_and_nothing_is_written(study, tmp_path):
    d, batch = _batch_dir(study, "mini", "delayed-turn-tool_output-50")
    lost = batch.runs[1].run_id
    summary = pq.read_table(d / "summary.parquet")
    write_table(summary.filter(pc.not_equal(summary.column("run_id"), lost)), d / "summary.parquet")
    log = tmp_path / "collect.log"
    with pytest.raises(RunOutputError, match=rf"1 of \d+ planned runs have no readable output.*{lost}"):
        collect(study, log=log)
    assert f"missing run {lost}: no row in {d / 'summary.parquet'}" in log.read_text().splitlines()
    assert not Layout(study.results_dir).dataset("runs").exists()


def test_a_corrupt_batch_file_names_each_of_its_runs(study, tmp_path):
    d, batch = _batch_dir(study, "trae", "baseline")
    (d / "tool_calls.parquet").write_bytes(b"PAR1 not really parquet")
    log = tmp_path / "collect.log"
    with pytest.raises(RunOutputError, match=f"{len(batch.runs)} of"):
        collect(study, log=log)
    lines = [line for line in log.read_text().splitlines() if line.startswith("missing run ")]
    assert [line.split()[2].rstrip(":") for line in lines] == [r.run_id for r in batch.runs]
    assert "not a readable Parquet file" in lines[0]


def test_mark_mode_keeps_missing_runs_as_rows_and_statistics_still_run(tmp_path):
    study = load_study(write_config(tmp_path, n_tasks=4, statistics={"missing_runs": "mark"}))
    write_batches(study)
    d, batch = _batch_dir(study, "trae", "immediate-token-both-75")
    (d / "summary.parquet").unlink()
    other_d, other = _batch_dir(study, "mini", "baseline")
    summary = pq.read_table(other_d / "summary.parquet")
    seeds = summary.column("seed").to_pylist()
    seeds[0] = seeds[0] + 1  # output of another study seed
    write_table(
        summary.set_column(summary.schema.get_field_index("seed"), "seed", pa.array(seeds, pa.int64())),
        other_d / "summary.parquet",
    )
    report = collect(study, log=tmp_path / "c.log")
    assert len(report.missing) == len(batch.runs) + 1
    runs = read_dataset(Layout(study.results_dir).dataset("runs"))
    assert runs.num_rows == report.planned
    missing = runs.filter(pc.equal(runs.column("status"), "missing")).to_pylist()
    assert {r["run_id"] for r in missing} == {r.run_id for r in batch.runs} | {other.runs[0].run_id}
    stale = next(r for r in missing if r["run_id"] == other.runs[0].run_id)
    assert "differs from the plan" in stale["error"] and stale["resolved"] is None

    from forgetting.report.stats.run import write_stats
    from forgetting.report.tables import write_tables

    paths = write_stats(study)
    effects = read_dataset(paths["effects"]).to_pylist()
    gone = [e for e in effects if e["agent"] == "trae" and e["configuration"] == "immediate-token-both-75"]
    assert gone and all(e["n_tasks"] == 0 for e in gone)
    write_tables(study)
    note = (Layout(study.results_dir).tables / "table1.md").read_text()
    assert "Computed on fewer than the study's 4 tasks (runs missing;" in note
    assert "trae/immediate-token-both-75 (0 tasks)" in note


def test_cli_collect_reports_missing_runs_in_one_line(study, run_cli):
    d, batch = _batch_dir(study, "mini", "baseline")
    (d / "calls.parquet").unlink()
    proc = run_cli("collect", study.source)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1].startswith("error: collect: ")
    assert f"missing run {batch.runs[0].run_id}: {d / 'calls.parquet'} not found" in proc.stderr


def test_a_run_without_its_evaluation_is_named_as_such_with_the_stage_that_makes_it(study, tmp_path):
    """The analysis leaves a run whose eval.json is gone (a redone run) a row without status;
    collection names what it lacks and what makes it, not "rerun their analysis"."""
    d, batch = _batch_dir(study, "mini", "delayed-turn-tool_output-50")
    lost = batch.runs[0].run_id
    reason = f"not analysed: {Layout(study.results_dir).run_dir(lost)}/eval.json: evaluation report not found"
    summary = pq.read_table(d / "summary.parquet")
    rows = summary.to_pylist()
    for row in rows:
        if row["run_id"] == lost:
            row.update(status=None, error=reason)
    write_table(pa.Table.from_pylist(rows, schema=summary.schema), d / "summary.parquet")
    with pytest.raises(RunOutputError) as failure:
        collect(study, log=tmp_path / "collect.log")
    message = str(failure.value)
    assert f"{lost}; the first is not evaluated ({reason}): run the workflow without regenerate=true" in message
    assert "rerun their analysis" not in message
