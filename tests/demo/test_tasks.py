"""The demo tasks (resources/demo/): real bugs in small real projects, each checked for real.

For every task: its checkout is the commit ``instance.json`` records; the scripted model's
``solution.yaml`` agrees with the gold patch and with what it reads; and, running pytest
for real, FAIL_TO_PASS fails before the gold patch and FAIL_TO_PASS + PASS_TO_PASS pass
after it, while the wrong first guess leaves a FAIL_TO_PASS test failing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from forgetting.demo.tasks import (
    ID_PATTERN,
    checkout,
    demo_task_ids,
    git_env,
    is_clean_checkout,
    load_instance,
    load_solution,
)
from forgetting.foundation.errors import ResourceError, UserError
from forgetting.instances.tasks import read_id_file
from forgetting_testkit.checkout import ROOT

DEMO = ROOT / "resources/demo"
TASKS = DEMO / "tasks"
IDS = demo_task_ids(TASKS)


def patched_files(patch: str) -> list[str]:
    return sorted(set(re.findall(r"^diff --git a/(\S+) b/", patch, flags=re.MULTILINE)))


def git(repo: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=repo, input=stdin, env=git_env(),
                          capture_output=True, text=True, check=True)
    return done.stdout


def apply_edits(repo: Path, edits: list[dict[str, Any]]) -> None:
    """Apply solution.yaml edits as the scripted model does: exact text, present once."""
    for edit in edits:
        path = repo / edit["path"]
        text = path.read_text(encoding="utf-8")
        count = text.count(edit["old"])
        assert count == 1, f"{edit['path']}: the old text occurs {count} times"
        path.write_text(text.replace(edit["old"], edit["new"]), encoding="utf-8")


@pytest.fixture(scope="module")
def checkouts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One pristine checkout per task, shared by the tests that only read it."""
    root = tmp_path_factory.mktemp("checkouts")
    return {i: checkout(TASKS, i, root / i) for i in IDS}


def scratch_copy(repo: Path, dest: Path) -> Path:
    shutil.copytree(repo, dest)
    return dest


# --------------------------------------------------------------------------- the set of tasks


def test_task_list_is_exactly_the_task_directories():
    listed = read_id_file(DEMO / "tasks.txt", key="tasks.txt")
    assert len(listed) == len(set(listed))
    assert sorted(listed) == IDS == sorted(p.name for p in TASKS.iterdir() if p.is_dir())
    for instance_id in listed:
        assert ID_PATTERN.fullmatch(instance_id), instance_id


def test_tasks_span_projects_bug_sites_and_file_sizes():
    instances = {i: load_instance(TASKS, i) for i in IDS}
    solutions = {i: load_solution(TASKS, i) for i in IDS}
    assert len(IDS) >= 8
    assert len({inst["repo"] for inst in instances.values()}) >= 3
    edited = {i: {e["path"] for e in s["edits"]} for i, s in solutions.items()}
    assert sum(len(paths) >= 2 for paths in edited.values()) >= 2, "some tasks need edits in two files"

    def lines(instance_id: str, path: str) -> int:
        project = DEMO / "projects" / instances[instance_id]["repo"].split("/")[1]
        return len((project / path).read_text(encoding="utf-8").splitlines())

    long_reads = [i for i, paths in edited.items() if any(lines(i, p) >= 300 for p in paths)]
    assert len(long_reads) >= 3, "some tasks must read files of several hundred lines"
    assert sum(s.get("wrong_first") is not None for s in solutions.values()) > len(IDS) / 2
    for i, inst in instances.items():
        assert patched_files(inst["patch"]) == sorted(edited[i])
        assert all(p.startswith("tests/") for p in patched_files(inst["test_patch"]))
        assert inst["test_cmd"] == "python -m pytest -rA"
        assert set(inst["FAIL_TO_PASS"]).isdisjoint(inst["PASS_TO_PASS"])
        assert len(inst["PASS_TO_PASS"]) >= 5


def test_problem_statements_read_like_issues():
    for instance_id in IDS:
        statement = load_instance(TASKS, instance_id)["problem_statement"]
        assert "```" in statement, f"{instance_id}: no reproduction snippet"
        assert re.search(r"[Ee]xpected", statement), f"{instance_id}: no expected behaviour"
        assert "demo__" not in statement and "FAIL_TO_PASS" not in statement


# --------------------------------------------------------------------------- checkout


@pytest.mark.parametrize("instance_id", IDS)
def test_checkout_is_the_recorded_base_commit_without_the_new_tests(instance_id, checkouts):
    instance = load_instance(TASKS, instance_id)
    repo = checkouts[instance_id]
    assert is_clean_checkout(repo, instance["base_commit"])
    assert instance["environment_setup_commit"] == instance["base_commit"]
    assert git(repo, "rev-list", "--count", "HEAD").strip() == "1"
    assert git(repo, "log", "-1", "--format=%an <%ae> %ad", "--date=iso-strict").startswith(
        "demo maintainer <maintainer@demo.invalid>"
    )
    for node in instance["FAIL_TO_PASS"]:
        path, name = node.split("::")
        text = (repo / path).read_text(encoding="utf-8") if (repo / path).exists() else ""
        assert f"def {name}(" not in text, f"{node} is part of the test patch, not the base"
    # the gold patch and the test patch apply to the base as they are
    git(repo, "apply", "--check", "-", stdin=instance["patch"])
    git(repo, "apply", "--check", "-", stdin=instance["test_patch"])


def test_checkout_ignores_the_hosts_git_settings(tmp_path, monkeypatch):
    """A user's git config, identity and repository variables must not change the hash."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "ignore").write_text("*.py\n")
    (home / ".gitconfig").write_text(
        "[core]\n\tautocrlf = true\n\texcludesFile = " + str(home / "ignore") + "\n"
        "[user]\n\tname = Someone Else\n\temail = else@example.org\n"
        "[init]\n\tdefaultBranch = trunk\n[commit]\n\tgpgSign = true\n"
    )
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Someone Else")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2001-01-01T00:00:00Z")
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))
    instance_id = IDS[0]
    repo = checkout(TASKS, instance_id, tmp_path / "repo")
    assert git(repo, "rev-parse", "HEAD").strip() == load_instance(TASKS, instance_id)["base_commit"]


def test_checkout_refuses_a_non_empty_destination(tmp_path):
    dest = tmp_path / "repo"
    dest.mkdir()
    (dest / "keep.txt").write_text("mine")
    with pytest.raises(UserError, match="not an empty directory"):
        checkout(TASKS, IDS[0], dest)
    assert (dest / "keep.txt").read_text() == "mine"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert checkout(TASKS, IDS[0], empty) == empty


def test_checkout_detects_a_changed_project_tree(tmp_path):
    copy = tmp_path / "demo"
    shutil.copytree(DEMO, copy, ignore=shutil.ignore_patterns("__pycache__"))
    instance_id = "demo__ledger-3"
    readme = copy / "projects/ledger/README.md"
    readme.write_text(readme.read_text() + "\nA local note.\n")
    dest = tmp_path / "repo"
    expected = r"instance\.json: base_commit is [0-9a-f]{12} but the checkout made [0-9a-f]{12}"
    with pytest.raises(ResourceError, match=expected):
        checkout(copy / "tasks", instance_id, dest)
    assert not dest.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["demo"], "no half-made checkout is left behind"


# --------------------------------------------------------------------------- solution.yaml


@pytest.mark.parametrize("instance_id", IDS)
def test_solution_edits_reproduce_the_gold_patch(instance_id, checkouts, tmp_path):
    instance = load_instance(TASKS, instance_id)
    solution = load_solution(TASKS, instance_id)
    base = checkouts[instance_id]
    for edit in [*solution["edits"], *([solution["wrong_first"]] if solution.get("wrong_first") else [])]:
        text = (base / edit["path"]).read_text(encoding="utf-8")
        assert text.count(edit["old"]) == 1, f"{edit['path']}: old text must occur once in the base"
    gold = scratch_copy(base, tmp_path / "gold")
    git(gold, "apply", "-", stdin=instance["patch"])
    edited = scratch_copy(base, tmp_path / "edited")
    apply_edits(edited, solution["edits"])
    for path in patched_files(instance["patch"]):
        assert (edited / path).read_text(encoding="utf-8") == (gold / path).read_text(encoding="utf-8"), path
    assert git(edited, "status", "--porcelain") == git(gold, "status", "--porcelain")
    # Python trusts a cached .pyc whose source has the same mtime (in whole seconds) and size:
    # an edit made within a second of a test run must change the size, or the run after it
    # could still execute the old code
    wrong = scratch_copy(base, tmp_path / "wrong")
    if solution.get("wrong_first"):
        apply_edits(wrong, [solution["wrong_first"]])
    for path in patched_files(instance["patch"]):
        size = (gold / path).stat().st_size
        assert size != (base / path).stat().st_size, f"{path}: the fix keeps the file's size"
        if path == (solution.get("wrong_first") or {}).get("path"):
            assert size != (wrong / path).stat().st_size, f"{path}: fix and wrong_first have one size"


@pytest.mark.parametrize("instance_id", IDS)
def test_every_edit_is_visible_in_what_the_solution_reads(instance_id, checkouts):
    """The scripted model may apply an edit only once its old text was shown by a read."""
    solution = load_solution(TASKS, instance_id)
    base = checkouts[instance_id]
    shown: dict[str, list[str]] = {}
    for read in solution["read"]:
        lines = (base / read["path"]).read_text(encoding="utf-8").splitlines(keepends=True)
        first, last = read.get("lines", [1, len(lines)])
        assert last <= len(lines), f"{read['path']} has {len(lines)} lines, the read asks for {last}"
        shown.setdefault(read["path"], []).append("".join(lines[first - 1 : last]))
    edits = [*solution["edits"], *([solution["wrong_first"]] if solution.get("wrong_first") else [])]
    for edit in edits:
        assert any(edit["old"] in text for text in shown.get(edit["path"], [])), (
            f"{edit['path']}: the edit's old text is not inside any read of the file"
        )
    # two-file tasks: the file read first is edited first, after two more reads (the second
    # file among them), so under delayed deletion its read may be gone by then
    edit_paths = list(dict.fromkeys(e["path"] for e in solution["edits"]))
    if len(edit_paths) > 1:
        read_paths = [r["path"] for r in solution["read"]]
        assert read_paths[0] == edit_paths[0]
        assert edit_paths[1] in read_paths[1:]
        assert len(read_paths) >= 3


@pytest.mark.parametrize("instance_id", IDS)
def test_locate_commands_find_something(instance_id, checkouts):
    for command in load_solution(TASKS, instance_id)["locate"]:
        done = subprocess.run(["bash", "-c", command], cwd=checkouts[instance_id],
                              capture_output=True, text=True, check=False)
        assert done.returncode == 0 and done.stdout.strip(), command


# --------------------------------------------------------------------------- validation


JSON, YAML = "instance.json", "solution.yaml"


def _broken_copy(tmp_path: Path, name: str, change: Any) -> tuple[Path, Path]:
    """A copy of one task whose ``name`` file has ``change`` applied to its parsed data."""
    tasks = tmp_path / "tasks"
    shutil.copytree(TASKS / "demo__ledger-1", tasks / "demo__ledger-1")
    path = tasks / "demo__ledger-1" / name
    data = json.loads(path.read_text()) if name == JSON else yaml.safe_load(path.read_text())
    change(data)
    path.write_text(json.dumps(data) if name == JSON else yaml.safe_dump(data))
    return tasks, path


@pytest.mark.parametrize(
    ("name", "change", "message"),
    [
        (JSON, lambda d: d.pop("base_commit"), "instance.json: base_commit: expected a string"),
        (JSON, lambda d: d.update(base_commit="abc"), "base_commit: expected a 40-digit hex"),
        (JSON, lambda d: d.update(FAIL_TO_PASS="t.py::y"), "FAIL_TO_PASS: expected a list of pytest"),
        (JSON, lambda d: d.update(FAIL_TO_PASS=[]), "FAIL_TO_PASS: needs at least one test"),
        (JSON, lambda d: d.update(repo="demo/other"), "repo: expected 'demo/ledger'"),
        (JSON, lambda d: d.update(created_at="last tuesday"), "created_at: 'last tuesday' is not"),
        (JSON, lambda d: d.update(patch="--- a/x\n+++ b/x\n"), "patch: expected a unified diff"),
        (JSON, lambda d: d.update(instance_id="demo__ledger-9"), "instance_id is 'demo__ledger-9'"),
        (YAML, lambda d: d["edits"][0].pop("old"), "edits[0].old: expected a string"),
        (YAML, lambda d: d["edits"][0].update(new=d["edits"][0]["old"]), "edits[0]: old and new are"),
        (YAML, lambda d: d["edits"][0].update(path="../x.py"), "edits[0].path: '../x.py' must be"),
        (YAML, lambda d: d["read"].append({"path": "x.py", "lines": [9, 2]}), "read[2].lines: expected"),
        (YAML, lambda d: d.update(locate=[]), "locate: expected a non-empty list"),
        (YAML, lambda d: d.update(hints="x"), "unknown key(s) hints"),
        (YAML, lambda d: d.pop("test"), "test: expected a non-empty string"),
        (YAML, lambda d: d["wrong_first"].pop("why"), "wrong_first.why: expected a string"),
    ],
)
def test_bad_task_fields_are_one_line_errors_naming_file_and_field(tmp_path, name, change, message):
    tasks, path = _broken_copy(tmp_path, name, change)
    load = load_instance if name == JSON else load_solution
    with pytest.raises(ResourceError) as info:
        load(tasks, "demo__ledger-1")
    assert message in str(info.value)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_solution_that_is_not_yaml(tmp_path):
    tasks, path = _broken_copy(tmp_path, YAML, lambda d: None)
    path.write_text("summary: [unclosed\n")
    with pytest.raises(ResourceError, match=r"solution\.yaml: line 2: not valid YAML"):
        load_solution(tasks, "demo__ledger-1")


# --------------------------------------------------------------------------- the command line


def test_demo_setup_checks_out_every_task_once(run_cli, tmp_path):
    dest = tmp_path / "repos"
    first = run_cli("demo", "setup", "--dest", dest)
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert [line.split()[0] for line in lines] == IDS
    for line, instance_id in zip(lines, IDS, strict=True):
        assert line.split()[1] == load_instance(TASKS, instance_id)["base_commit"][:12]
        assert is_clean_checkout(dest / instance_id, load_instance(TASKS, instance_id)["base_commit"])
    again = run_cli("demo", "setup", "--dest", dest)
    assert again.returncode == 0
    assert all(line.endswith("(already checked out)") for line in again.stdout.splitlines())

    changed = dest / "demo__timekit-1/timekit/durations.py"
    changed.write_text(changed.read_text() + "# local change\n")
    refused = run_cli("demo", "setup", "--dest", dest)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        f"error: {dest}: not a clean checkout of its base commit: demo__timekit-1;"
        " rerun with --force to replace (their changes are lost)"
    ]
    assert changed.read_text().endswith("# local change\n"), "nothing is replaced without --force"
    forced = run_cli("demo", "setup", "--dest", dest, "--force")
    assert forced.returncode == 0
    replaced = [line.split()[0] for line in forced.stdout.splitlines() if line.endswith("(replaced)")]
    assert replaced == ["demo__timekit-1"]
    assert not changed.read_text().endswith("# local change\n")
    assert sorted(p.name for p in dest.iterdir()) == IDS


def test_demo_setup_names_a_missing_task_directory(run_cli, tmp_path):
    done = run_cli("demo", "setup", "--tasks", tmp_path / "nope", "--dest", tmp_path / "repos")
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: --tasks: demo task directory not found: {tmp_path / 'nope'}"


# --------------------------------------------------------------------------- running the tests for real


def _pytest_outcomes(repo: Path, command: str, files: list[str]) -> dict[str, str]:
    """``test_cmd`` on ``files`` in ``repo``: node id -> PASSED / FAILED / ERROR."""
    done = _shell(repo, f"{command} -p no:cacheprovider {' '.join(files)}")
    outcomes = dict(
        (m.group(2), m.group(1))
        for m in re.finditer(r"^(PASSED|FAILED|ERROR) (\S+::\S+)", done.stdout, flags=re.MULTILINE)
    )
    assert outcomes, done.stdout[-2000:] + done.stderr[-2000:]
    return outcomes


def _shell(repo: Path, command: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    # the tasks' tests use no plugins; not loading the venv's (hypothesis, …) saves most of the startup
    env.update(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)
    return subprocess.run(["bash", "-c", command], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def _verdict(instance_id: str, base: Path, scratch: Path) -> dict[str, Any]:
    instance = load_instance(TASKS, instance_id)
    solution = load_solution(TASKS, instance_id)
    files = patched_files(instance["test_patch"])
    out: dict[str, Any] = {}
    # the agent's view: no test patch; the solution's test command must tell wrong from right
    out["cmd_base"] = _shell(base, solution["test"]).returncode
    fixed = scratch_copy(base, scratch / "fixed")
    apply_edits(fixed, solution["edits"])
    out["cmd_fixed"] = _shell(fixed, solution["test"]).returncode
    # the evaluation's view: the test patch applied
    graded = scratch_copy(base, scratch / "graded")
    git(graded, "apply", "-", stdin=instance["test_patch"])
    out["before"] = _pytest_outcomes(graded, instance["test_cmd"], files)
    if solution.get("wrong_first"):
        wrong = scratch_copy(base, scratch / "wrong")
        apply_edits(wrong, [solution["wrong_first"]])
        out["cmd_wrong"] = _shell(wrong, solution["test"]).returncode
        git(wrong, "apply", "-", stdin=instance["test_patch"])
        out["wrong"] = _pytest_outcomes(wrong, instance["test_cmd"], files)
    git(graded, "apply", "-", stdin=instance["patch"])
    out["after"] = _pytest_outcomes(graded, instance["test_cmd"], files)
    return out


@pytest.fixture(scope="module")
def verdicts(checkouts, tmp_path_factory) -> dict[str, dict[str, Any]]:
    """Every task's test runs, two tasks at a time (one pytest process per task and state)."""
    root = tmp_path_factory.mktemp("runs")

    def one(instance_id: str) -> dict[str, Any]:
        scratch = root / instance_id
        scratch.mkdir()
        return _verdict(instance_id, checkouts[instance_id], scratch)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(IDS, pool.map(one, IDS), strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("instance_id", IDS)
def test_fail_to_pass_fails_before_and_everything_passes_after_the_gold_patch(instance_id, verdicts):
    instance = load_instance(TASKS, instance_id)
    result = verdicts[instance_id]
    f2p, p2p = instance["FAIL_TO_PASS"], instance["PASS_TO_PASS"]
    before, after = result["before"], result["after"]
    assert [t for t in f2p if before.get(t) == "PASSED"] == [], "FAIL_TO_PASS passes without the fix"
    assert [t for t in p2p if before.get(t) != "PASSED"] == [], "PASS_TO_PASS fails without the fix"
    assert [t for t in f2p + p2p if after.get(t) != "PASSED"] == [], "tests fail after the gold patch"
    assert sorted(result["after"]) == sorted(f2p + p2p), "the lists name every test of the test files"


@pytest.mark.slow
@pytest.mark.parametrize("instance_id", IDS)
def test_the_solutions_test_command_tells_the_fix_from_the_bug(instance_id, verdicts):
    result = verdicts[instance_id]
    assert result["cmd_base"] != 0, "the test command passes on the buggy base"
    assert result["cmd_fixed"] == 0, "the test command fails after the solution's edits"


@pytest.mark.slow
@pytest.mark.parametrize("instance_id", [i for i in IDS if load_solution(TASKS, i).get("wrong_first")])
def test_wrong_first_leaves_a_fail_to_pass_test_failing(instance_id, verdicts):
    result = verdicts[instance_id]
    f2p = load_instance(TASKS, instance_id)["FAIL_TO_PASS"]
    assert any(result["wrong"].get(t) != "PASSED" for t in f2p)
    assert result["cmd_wrong"] != 0, "the test command cannot tell the wrong first edit from the fix"
