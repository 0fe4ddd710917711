"""The study's dataset from a file or the hub: SWE-bench Verified's real rows (the shared
Parquet file, classic schema), the same rows as JSONL and as swebench-5 rows, each parsed once
into an Instance; a row missing what a stage needs is one line naming row, field and stage;
`forgetting plan` checks the study's task list against the rows."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from forgetting.evaluate.apptainer import ApptainerBackend
from forgetting.evaluate.grading import require_harness_fields, spec_for
from forgetting.foundation.errors import ResourceError
from forgetting.instances.dataset_file import HubDataset, dataset_source, read_instances
from forgetting.instances.load import check_task_list, load_instances
from forgetting.instances.record import CLASSIC, SWEBENCH5, Instance, require
from forgetting.instances.tasks import read_id_file
from forgetting.run.workspace import check_task_rows
from forgetting.study.config import load_study
from forgetting.study.evaluation import EvalSettings
from forgetting_testkit.checkout import ROOT
from forgetting_testkit.runner import runner_settings
from forgetting_testkit.shared_data import VERIFIED_IDS, VERIFIED_PARQUET, shared_file

STUDY_TASKS = ROOT / "resources/tasks/swe-bench-verified-100.txt"
ALL_IDS = ROOT / "resources/tasks/swe-bench-verified-all.txt"


@pytest.fixture(scope="module")
def parquet() -> Path:
    return shared_file(VERIFIED_PARQUET)


@pytest.fixture(scope="module")
def rows(parquet) -> dict[str, Instance]:
    return read_instances(parquet)


def _study(tmp_path: Path, instances: str, tasks: Path = STUDY_TASKS, **dataset) -> Path:
    cfg = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    cfg["study"]["results_dir"] = str(tmp_path / "results")
    cfg["tasks"] = {"ids_file": str(tasks)}
    cfg["dataset"] = {"kind": "swebench", "known_ids": str(ALL_IDS), "instances": instances, **dataset}
    cfg["pricing"] = {"dir": str(ROOT / "resources/pricing")}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_the_real_rows_load_into_typed_instances(rows, parquet):
    assert len(rows) == 500
    row = rows["django__django-11099"]
    assert isinstance(row, Instance) and row.schema == CLASSIC
    assert row.repo == "django/django" and row.version == "3.0" and len(row.base_commit) == 40
    # FAIL_TO_PASS is JSON text in the file: a tuple on the record, a list in the row swebench reads
    raw = pq.read_table(parquet).to_pylist()
    first = next(r for r in raw if r["instance_id"] == "django__django-11099")
    assert isinstance(first["FAIL_TO_PASS"], str)
    assert row.fail_to_pass == tuple(json.loads(first["FAIL_TO_PASS"])) and row.fail_to_pass
    assert row["FAIL_TO_PASS"] == list(row.fail_to_pass) and row["difficulty"] == first["difficulty"]
    assert row.problem_statement == first["problem_statement"]
    assert {r.schema for r in rows.values()} == {CLASSIC}
    assert Counter(r.repo for r in rows.values())["django/django"] == 231


def test_the_shipped_id_list_is_the_datasets_and_holds_the_study_tasks(rows):
    """resources/tasks/swe-bench-verified-all.txt (dataset.known_ids) is the shared id list,
    and both are exactly the 500 rows' ids."""
    shipped = read_id_file(ALL_IDS, key="known")
    assert shipped == read_id_file(shared_file(VERIFIED_IDS), key="shared") == sorted(rows)
    assert set(read_id_file(STUDY_TASKS, key="tasks")) <= set(rows)


def test_the_same_rows_as_jsonl_with_lists_or_json_text_read_the_same(rows, tmp_path):
    picked = ["django__django-11099", "sympy__sympy-20590", "pytest-dev__pytest-5262"]
    lines = []
    for i, iid in enumerate(picked):
        row = dict(rows[iid].row)
        if i % 2:  # JSON text, as on the hub
            row["FAIL_TO_PASS"], row["PASS_TO_PASS"] = json.dumps(row["FAIL_TO_PASS"]), json.dumps(row["PASS_TO_PASS"])
        lines.append(json.dumps(row))
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(lines) + "\n")
    again = read_instances(path)
    assert list(again) == picked
    for iid in picked:
        assert again[iid].fail_to_pass == rows[iid].fail_to_pass and again[iid].pass_to_pass == rows[iid].pass_to_pass
        assert again[iid].problem_statement == rows[iid].problem_statement
        assert again[iid].source == f"{path} line {picked.index(iid) + 1}"


def test_swebench5_rows_are_read_and_go_through_swebenchs_make_test_spec(rows, tmp_path):
    row = dict(rows["django__django-11099"].row)
    arch = "x86_64"  # as the hub's rows name it (never a literal in a name: tests/test_instance_images.py)
    row |= {"image": f"swebench/sweb.eval.{arch}.django_1776_django-11099:latest", "log_parser": "parse_log_django",
            "eval_type": "pass_and_fail",
            "eval_script": "#!/bin/bash\nset -uxo pipefail\ncd /testbed\n: '>>>>> Start Test Output'\n"
                           "./tests/runtests.py --verbosity 2 auth_tests.test_validators\n: '>>>>> End Test Output'\n"}
    path = tmp_path / "verified5.jsonl"
    path.write_text(json.dumps(row) + "\n")
    (five,) = read_instances(path).values()
    assert five.schema == SWEBENCH5 and five.log_parser == "parse_log_django"
    spec = spec_for(five)
    assert list(rows["django__django-11099"].fail_to_pass) == spec.FAIL_TO_PASS
    assert "./tests/runtests.py --verbosity 2 auth_tests.test_validators" in spec.eval_script_list
    require_harness_fields({five.instance_id: five}, backend="docker")  # all there: no error


def test_a_classic_row_in_the_instance_images_names_row_field_stage_and_the_dataset_to_load(rows, tmp_path):
    row = rows["astropy__astropy-12907"]
    with pytest.raises(ResourceError) as err:
        require_harness_fields({row.instance_id: row}, backend="apptainer", optional=("image",))
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{shared_file(VERIFIED_PARQUET)} row 1: instance astropy__astropy-12907:")
    assert "lacks eval_script, log_parser, eval_type, which the apptainer evaluation needs" in message
    assert "classic (princeton-nlp) row" in message and "load SWE-bench/SWE-bench_Verified instead" in message
    # the backend's own check, as the evaluation calls it before any work, on the study's rows
    study = load_study(_study(tmp_path, str(shared_file(VERIFIED_PARQUET))))
    backend = ApptainerBackend(EvalSettings.from_section({"apptainer": {"executable": sys.executable}}))
    with pytest.raises(ResourceError, match="which the apptainer evaluation needs"):
        backend.check(load_instances(study, ["astropy__astropy-12907"]))


def test_a_row_without_a_problem_statement_stops_the_runs_before_the_model_server(rows, tmp_path):
    row = {k: v for k, v in rows["django__django-11099"].row.items() if k != "problem_statement"}
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(dict(rows["sympy__sympy-20590"].row)) + "\n" + json.dumps(row) + "\n")
    settings = runner_settings(dataset={"kind": "swebench", "instances": str(path)})
    check_task_rows(settings, {"sympy__sympy-20590"})
    with pytest.raises(ResourceError) as err:
        check_task_rows(settings, {"sympy__sympy-20590", "django__django-11099"})
    assert str(err.value) == (f"{path} line 2: instance django__django-11099: its dataset row lacks problem_statement, "
                              "which the agent run needs")
    with pytest.raises(ResourceError, match=r"no instance 'astropy__astropy-12907'"):
        check_task_rows(settings, {"astropy__astropy-12907"})
    with pytest.raises(ResourceError, match=r"^f row 1: instance x: its dataset row lacks repo, which the task list"):
        require({"x": Instance(instance_id="x", source="f row 1", schema=CLASSIC)}, "the task list check")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"instance_id": "a__b-1", "FAIL_TO_PASS": "[\\"t\\"", "PASS_TO_PASS": []}',
         "line 1 (a__b-1): FAIL_TO_PASS: not a JSON list of test ids"),
        ('{"instance_id": "a__b-1", "FAIL_TO_PASS": [1, 2], "PASS_TO_PASS": []}',
         "line 1 (a__b-1): FAIL_TO_PASS: expected a list of test ids (strings), got list"),
        ('{"instance_id": "a__b-1", "problem_statement": 7}',
         "line 1 (a__b-1): problem_statement: expected a string, got int"),
        ('{"repo": "a/b"}', "line 1: instance_id: missing or not a string"),
        ('{"instance_id": "a__b-1"}\n{"instance_id": "a__b-1"}', "line 2: instance 'a__b-1' again (first at"),
    ],
)
def test_a_malformed_row_is_one_line_naming_file_row_and_field(tmp_path, line, message):
    path = tmp_path / "rows.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(ResourceError) as err:
        read_instances(path)
    assert str(err.value).startswith(f"{path} ") and message in str(err.value) and "\n" not in str(err.value)


def test_a_file_named_parquet_that_is_not_one_is_one_line(tmp_path):
    path = tmp_path / "rows.parquet"
    path.write_text('{"instance_id": "a__b-1"}\n')
    with pytest.raises(ResourceError, match=r"rows\.parquet: not a readable Parquet file of dataset rows"):
        read_instances(path)
    os.mkfifo(tmp_path / "fifo.jsonl")
    for odd in (tmp_path, tmp_path / "fifo.jsonl"):  # a directory, a FIFO: refused without reading
        with pytest.raises(ResourceError, match="not a regular file"):
            read_instances(odd)
    with pytest.raises(ResourceError, match="instances file not found"):
        read_instances(tmp_path / "gone.parquet")


def test_the_hub_is_read_with_the_datasets_package(rows, parquet, tmp_path):
    """``hf:NAME`` goes to ``datasets.load_dataset(NAME, split=...)``: here a local copy of the
    hub repository's layout (data/<split>-00000-of-00001.parquet), which datasets reads offline."""
    repo = tmp_path / "SWE-bench_Verified"
    (repo / "data").mkdir(parents=True)
    shutil.copy(parquet, repo / "data" / "test-00000-of-00001.parquet")
    source = dataset_source(f"hf:{repo}", root=tmp_path)
    assert source == HubDataset(str(repo), "test")
    hub = read_instances(source, {"django__django-11099", "sympy__sympy-20590"})
    assert sorted(hub) == ["django__django-11099", "sympy__sympy-20590"]
    for iid, row in hub.items():
        assert row.source.startswith(f"hf:{repo} (test) row ")
        assert (row.problem_statement, row.fail_to_pass, row.pass_to_pass) == (
            rows[iid].problem_statement, rows[iid].fail_to_pass, rows[iid].pass_to_pass)


def test_plan_reports_the_study_tasks_against_the_real_rows(parquet, tmp_path, run_cli):
    done = run_cli("plan", str(_study(tmp_path, str(parquet))))
    assert done.returncode == 0, done.stderr
    assert (f"dataset: 100 of 100 tasks found in {parquet} (500 rows, classic schema): django 46, sympy 15, "
            "sphinx 9, matplotlib 7, scikit-learn 6, astropy 5, xarray 4, pytest 4, requests 2, pylint 2"
            ) in done.stdout.splitlines()
    assert "note: classic rows lack image, eval_script, log_parser, eval_type" in done.stdout


def test_plan_refuses_a_task_list_the_rows_lack(rows, tmp_path, run_cli):
    subset = tmp_path / "subset.jsonl"
    subset.write_text("".join(json.dumps(dict(rows[i].row)) + "\n" for i in sorted(rows)[:10]))
    tasks = tmp_path / "tasks.txt"
    tasks.write_text("astropy__astropy-12907\ndjango__django-11099\n")
    done = run_cli("plan", str(_study(tmp_path, str(subset), tasks)))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: {subset}: the task list's 'django__django-11099' is not among its 10 rows; "
        "is dataset.instances the SWE-bench Verified file?"]
    # the rows not fetched yet: the plan is made, the check left for when they are there
    study = load_study(_study(tmp_path, str(tmp_path / "not-yet.jsonl"), tasks))
    assert check_task_list(study) is None


def test_the_hub_out_of_reach_is_one_line_saying_what_to_do(tmp_path, run_cli):
    tasks = tmp_path / "tasks.txt"
    tasks.write_text("django__django-11099\n")
    offline = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    done = run_cli("plan", str(_study(tmp_path, "hf:SWE-bench/SWE-bench_Verified", tasks)), env=offline)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: dataset.instances hf:SWE-bench/SWE-bench_Verified (test): cannot load it from "
                           "the Hugging Face hub (")
    assert line.endswith("fetch a file elsewhere with `forgetting dataset fetch --out FILE` and point "
                         "dataset.instances at it")


@pytest.mark.parametrize("name", ["rows.jsonl", "rows.parquet"])
def test_dataset_fetch_writes_a_file_the_loader_reads_back_the_same(rows, parquet, tmp_path, run_cli, name):
    repo = tmp_path / "SWE-bench_Verified"  # the hub repository's layout, read by datasets offline
    (repo / "data").mkdir(parents=True)
    shutil.copy(parquet, repo / "data" / "test-00000-of-00001.parquet")
    out = tmp_path / name
    done = run_cli("dataset", "fetch", "--name", str(repo), "--out", str(out), env={"HF_HOME": str(tmp_path / "hf")})
    assert done.returncode == 0, done.stderr
    assert f"500 instances of {repo} (test) -> {out}" in done.stdout
    assert "note: rows lack eval_script, eval_type, image, log_parser" in done.stdout
    again = read_instances(out)
    assert list(again) == list(rows)
    for iid in ("django__django-11099", "sympy__sympy-20590", "pytest-dev__pytest-5262"):
        assert again[iid].row == rows[iid].row
