"""The run record (``run.json``) and what is at a path: ``forgetting.records``.

A run record is built in one place for the runner and the synthetic-study generator, written
as sorted JSON and read back field by field: a missing or wrongly typed field is one error
line naming the file and the field. Where a path is a run directory, a trajectory or a call
log is decided once, for ``forgetting label``, ``forgetting cost`` and the analysis.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from forgetting import cli
from forgetting.behaviour import label_run
from forgetting.cost import load_run
from forgetting.foundation.errors import RunOutputError, UserError
from forgetting.records import (
    SYNTHETIC_BACKEND,
    CallLogFile,
    RunDir,
    RunRecord,
    TrajectoryFile,
    find_runs,
    locate,
    read_run_record,
    write_run_record,
)
from forgetting.report.stats.labels import provenance_note
from forgetting.study.plan import plan_runs
from forgetting_testkit.runner import study_at
from forgetting_testkit.trajectories import (
    edit_at,
    run_record,
    toolcall_trajectory,
    trae_trajectory,
    write_call_log,
    write_json,
    write_run_json,
)

RUN_ID = "mini/delayed-turn-tool_output-50/demo__t1/1"


def test_a_record_built_for_a_planned_run_reads_back_equal_and_writes_the_same_bytes(tmp_path):
    (run, *_) = plan_runs(study_at(tmp_path, agents=["mini"], configurations={"names": ["delayed-turn-both-50"]}))
    record = RunRecord.for_run(
        run, status="capped", exit_status="LimitsExceeded", turns=40, turn_cap=40, agent_calls=41,
        started=1_796_113_800.938, wall_s=12.5, model_s=None, agent_exit_code=None, patch_bytes=0,
        error=None, model_backend="scripted", versions={"agent": {"name": "mini-swe-agent"}, "pipeline": {}},
    )
    assert (record.run_id, record.seed, record.deletion) == (run.run_id, run.seed, run.deletion)
    path = tmp_path / "run.json"
    n = write_run_record(path, record)
    data = path.read_bytes()
    # the format every earlier run.json has: sorted keys, two-space indent, UTF-8, a final newline
    assert data == (json.dumps(record.to_dict(), indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()
    assert n == len(data) and json.loads(data)["deletion"] == run.deletion.as_dict()
    again = read_run_record(path)
    assert again == record and again.to_json().encode() == data
    assert not record.synthetic and RunRecord.from_json({**record.to_dict(), "model_backend": "synthetic"},
                                                        path).synthetic


#: a mutation of a whole run record → what its one error line says after the file name
RECORD_FIELDS: dict[str, tuple[Callable[[dict], None], str]] = {
    "turns missing": (edit_at("turns", delete=True), "turns is missing, expected an integer; rerun this run"),
    "turns a string": (edit_at("turns", value="10"), "turns is a string, expected an integer; rerun this run"),
    "turns negative": (edit_at("turns", value=-1), "turns -1 is not a count of model calls; rerun this run"),
    "an unknown status": (edit_at("status", value="finished"), "status 'finished' is not a run outcome"),
    "status a number": (edit_at("status", value=3), "status is the number 3, expected a string"),
    "seed a string": (edit_at("seed", value="7"), "seed is a string, expected an integer"),
    "repeat a boolean": (edit_at("repeat", value=True), "repeat is true (a boolean), expected an integer"),
    "deletion a string": (edit_at("deletion", value="nope"), "deletion is a string, expected an object"),
    "deletion amount a string": (edit_at("deletion", "amount", value="50"),
                                 "deletion.amount is a string, expected a number or null"),
    "deletion keep_last missing": (edit_at("deletion", "keep_last", delete=True),
                                   "deletion.keep_last is missing, expected an integer"),
    "an unknown deletion field": (edit_at("deletion", "budget", value=1), "deletion: unknown field 'budget'"),
    "versions a list": (edit_at("versions", value=[]), "versions is a list, expected an object"),
    "an unknown field": (edit_at("synthetic", value=True), "unknown field 'synthetic'"),
    "started a string": (edit_at("started", value="now"), "started is a string, expected a number"),
    "model_s missing": (edit_at("model_s", delete=True), "model_s is missing, expected a number"),
    "error a number": (edit_at("error", value=5), "error is the number 5, expected a string or null"),
    "agent_calls a float": (edit_at("agent_calls", value=1.5), "agent_calls is the number 1.5, expected an integer"),
}


@pytest.mark.parametrize("case", sorted(RECORD_FIELDS))
def test_a_bad_run_record_field_is_one_line_naming_the_file_and_the_field(case, tmp_path, capsys):
    mutate, words = RECORD_FIELDS[case]
    run_dir = tmp_path / "runs" / RUN_ID
    write_json(run_dir / "trajectory.json", toolcall_trajectory())
    doc = run_record(RUN_ID).to_dict()
    mutate(doc)
    (run_dir / "run.json").write_text(json.dumps(doc))
    with pytest.raises(RunOutputError) as err:
        read_run_record(run_dir / "run.json")
    text = str(err.value)
    assert text.startswith(f"{run_dir / 'run.json'}: ") and words in text and "\n" not in text, text
    assert cli.main(["label", str(run_dir)]) == 2  # every reader of the run directory says the same
    assert capsys.readouterr().err == f"error: {text}\n"


@pytest.mark.parametrize(("content", "words"), [
    ('{"run_id": "mini/', "run record is not readable JSON"),
    ("[1, 2]", "the document is a list, expected an object"),
    (b"\xff\xfe", r"run record is not readable \(UnicodeDecodeError\)"),
])
def test_a_run_record_that_is_no_json_object(content, words, tmp_path):
    path = tmp_path / "run.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(RunOutputError, match=rf"^{path}: {words}"):
        read_run_record(path)
    with pytest.raises(RunOutputError, match=rf"^{tmp_path / 'nope.json'}: run record not found"):
        read_run_record(tmp_path / "nope.json")


def test_what_is_at_a_path(tmp_path):
    run_dir = tmp_path / "results" / "runs" / RUN_ID
    traj = write_json(run_dir / "trajectory.json", toolcall_trajectory())
    calls = write_call_log(run_dir / "calls.jsonl", {})
    found = locate(run_dir)
    assert found == RunDir(run_dir, RUN_ID, None, traj, calls)  # no run.json: the id from the path
    write_run_json(run_dir, turns=10, status="capped")
    found = locate(run_dir)
    assert isinstance(found, RunDir) and found.record == run_record(RUN_ID, turns=10, status="capped")
    assert locate(calls) == CallLogFile(calls) and locate(traj) == TrajectoryFile(traj)
    # a directory with only one *.traj.json is that trajectory; with two it is nothing
    loose = tmp_path / "loose"
    one = write_json(loose / "a.traj.json", toolcall_trajectory())
    assert locate(loose) == TrajectoryFile(one)
    write_json(loose / "b.traj.json", toolcall_trajectory())
    with pytest.raises(RunOutputError, match="not a run directory"):
        locate(loose)
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(RunOutputError, match="neither a call log"):
        locate(tmp_path / "notes.txt")
    with pytest.raises(RunOutputError, match="no such file or directory"):
        locate(tmp_path / "missing")
    # a tree: its run directories and the trajectory files outside them, in order
    trae = write_json(tmp_path / "results" / "other" / "trajectory_trae.json", trae_trajectory())
    assert find_runs(tmp_path / "results") == [locate(run_dir), TrajectoryFile(trae)]
    assert find_runs(run_dir) == [locate(run_dir)]
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="no run directory or trajectory file"):
        find_runs(tmp_path / "empty")


def test_the_located_run_is_what_label_and_cost_read(tmp_path):
    run_dir = tmp_path / "results" / "runs" / RUN_ID
    write_json(run_dir / "trajectory.json", toolcall_trajectory())
    write_call_log(run_dir / "calls.jsonl", {})
    write_run_json(run_dir, status="capped", turns=10)
    found = locate(run_dir)
    result = label_run(found)
    assert result.run_id == RUN_ID and result.summary["capped"] is True  # the record's status decides
    assert load_run(found).kind == "calllog"  # a run directory is priced from its call log
    # label reads trajectories, cost prompts: each says so for the other kind of file
    with pytest.raises(RunOutputError, match="a call log, not a trajectory"):
        label_run(run_dir / "calls.jsonl")
    trae = write_json(tmp_path / "trae.json", trae_trajectory())
    with pytest.raises(RunOutputError, match="a Trae agent trajectory records no prompts"):
        load_run(trae)
    # a run directory without its trajectory
    (run_dir / "trajectory.json").unlink()
    with pytest.raises(RunOutputError, match=rf"^{run_dir}: no trajectory.json"):
        label_run(run_dir)


def test_the_synthetic_marker_is_the_records_model_backend():
    assert SYNTHETIC_BACKEND == "synthetic" and run_record(RUN_ID, model_backend="synthetic").synthetic
    assert provenance_note(["synthetic", None]).startswith("SYNTHETIC DATA")
    assert provenance_note(["scripted"]).startswith("Demo data") and provenance_note(["vllm", None]) == ""
