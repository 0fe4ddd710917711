"""Grading across the study's repositories: for each repository of the study's task list, logs
in that repository's real test-runner format (forgetting_testkit.runner_logs: Django's
runtests.py, sympy's bin/test, pytest -rA, sphinx's pytest under tox, astropy's verbose
pytest), built from its rows' real FAIL_TO_PASS and PASS_TO_PASS ids in the shared Parquet
file, graded by swebench's own parser for the repository through the pipeline's grading."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from swebench.harness.log_parsers import PARSER_REGISTRY
from swebench.harness.log_parsers.python import MAP_REPO_TO_PARSER_PY

from forgetting.evaluate.grading import repository_parser, spec_for, verdict_from_log
from forgetting.instances.dataset_file import read_instances
from forgetting.instances.record import Instance
from forgetting.instances.tasks import read_id_file
from forgetting_testkit.checkout import ROOT
from forgetting_testkit.runner_logs import FAIL, PASS, eval_log
from forgetting_testkit.shared_data import VERIFIED_PARQUET, shared_file

STUDY_REPOSITORIES = {
    "django/django": 46, "sympy/sympy": 15, "sphinx-doc/sphinx": 9, "matplotlib/matplotlib": 7,
    "scikit-learn/scikit-learn": 6, "astropy/astropy": 5, "pydata/xarray": 4, "pytest-dev/pytest": 4,
    "psf/requests": 2, "pylint-dev/pylint": 2,
}


@pytest.fixture(scope="module")
def rows() -> dict[str, Instance]:
    return read_instances(shared_file(VERIFIED_PARQUET))


@pytest.fixture(scope="module")
def study_rows(rows) -> dict[str, Instance]:
    return {t: rows[t] for t in read_id_file(ROOT / "resources/tasks/swe-bench-verified-100.txt", key="tasks")}


def _grade(row: Instance, text: str, tmp_path: Path):
    log = tmp_path / "test_output.txt"
    log.write_text(text, encoding="utf-8")
    return verdict_from_log(spec_for(row), log, timed_out=False)


def test_the_study_tasks_cover_these_repositories(study_rows):
    assert Counter(r.repo for r in study_rows.values()) == STUDY_REPOSITORIES


@pytest.mark.parametrize("repo", sorted(STUDY_REPOSITORIES))
def test_each_study_repository_graded_in_its_runners_format(repo, study_rows, tmp_path):
    mine = [r for r in study_rows.values() if r.repo == repo]
    assert len(mine) == STUDY_REPOSITORIES[repo]
    for row in mine:
        spec = spec_for(row)
        # a classic row names no parser: swebench's own for the repository
        assert row.log_parser is None and spec.log_parser == repository_parser(repo)
        assert PARSER_REGISTRY[spec.log_parser] is MAP_REPO_TO_PARSER_PY[repo]
        tests = [*row.fail_to_pass, *row.pass_to_pass]
        passing = dict.fromkeys(tests, PASS)

        verdict = _grade(row, eval_log(row, passing), tmp_path)
        assert verdict.status == "resolved", (row.instance_id, verdict.note, verdict.grade)
        assert verdict.grade.tests["FAIL_TO_PASS"] == {"success": list(row.fail_to_pass), "failure": []}
        assert verdict.grade.tests["PASS_TO_PASS"] == {"success": list(row.pass_to_pass), "failure": []}

        broken = row.fail_to_pass[-1]
        verdict = _grade(row, eval_log(row, {**passing, broken: FAIL}), tmp_path)
        assert verdict.status == "unresolved", (row.instance_id, verdict.note)
        assert verdict.grade.tests["FAIL_TO_PASS"]["failure"] == [broken]

        if row.pass_to_pass:  # a regression in the tests that passed before: not resolved either
            verdict = _grade(row, eval_log(row, {**passing, row.pass_to_pass[0]: FAIL}), tmp_path)
            assert verdict.status == "unresolved" and verdict.grade.tests["PASS_TO_PASS"]["failure"] == [
                row.pass_to_pass[0]]

        verdict = _grade(row, eval_log(row, passing, markers=False), tmp_path)
        assert (verdict.status, verdict.grade) == ("error", None), row.instance_id
        assert verdict.note == "the tests never ran: no test-output markers in the log"

        for cut in (0.0, 0.5, 0.99):  # killed, or the log truncated, before the end marker
            verdict = _grade(row, eval_log(row, passing, cut_at=cut), tmp_path)
            assert (verdict.status, verdict.grade) == ("error", None), (row.instance_id, cut)
            assert verdict.note.startswith("the log is cut short: the tests started but the log ends before")


def test_every_rows_test_ids_parse(rows, tmp_path):
    """All 500 rows, all 12 repositories: each FAIL_TO_PASS and PASS_TO_PASS id, printed as the
    repository's runner prints that test, is read back by swebench's parser under that id."""
    assert len(rows) == 500
    repos = Counter()
    for row in rows.values():
        tests = [*row.fail_to_pass, *row.pass_to_pass]
        assert row.fail_to_pass, row.instance_id
        verdict = _grade(row, eval_log(row, dict.fromkeys(tests, PASS)), tmp_path)
        assert verdict.status == "resolved", (row.instance_id, verdict.note)
        success = [*verdict.grade.tests["FAIL_TO_PASS"]["success"], *verdict.grade.tests["PASS_TO_PASS"]["success"]]
        assert success == tests, row.instance_id
        repos[row.repo] += 1
    assert len(repos) == 12 and repos["django/django"] == 231


def test_sympys_last_test_of_a_file_shares_its_line_with_the_files_mark(study_rows, tmp_path):
    """Why each sympy file of these logs ends with a test the row does not list: bin/test
    right-aligns ``[OK]`` on the last test's line, and swebench's parser does not read it."""
    row = next(r for r in study_rows.values() if r.repo == "sympy/sympy")
    text = eval_log(row, dict.fromkeys([*row.fail_to_pass, *row.pass_to_pass], PASS))
    (last,) = [line for line in text.splitlines() if line.startswith("test_unlisted_last ok")]
    assert last.endswith("[OK]") and len(last) == 80
    verdict = _grade(row, text, tmp_path)
    assert "test_unlisted_last" not in verdict.grade.status_map
