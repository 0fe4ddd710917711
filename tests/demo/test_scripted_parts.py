"""The scripted model's parts: commands it builds and parses back (run for real in a scratch
git repository of the fixture task), observation reading, task knowledge, settings, and the
prefix-cache emulation."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from forgetting.demo.scripted import ScriptedSettings, TaskBook
from forgetting.demo.scripted import commands as cmds
from forgetting.demo.scripted.knowledge import ReadSpec, load_task
from forgetting.demo.scripted.observations import (
    covered,
    file_text,
    fragment_guess,
    is_intact,
    outcome,
    returncode,
)
from forgetting.demo.scripted.prefix_cache import PrefixCache
from forgetting.foundation.errors import ConfigError, ResourceError
from forgetting.study.config import load_schema
from forgetting_testkit import scripted as S


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return S.checkout(tmp_path / "repo")


@pytest.fixture
def task():
    return load_task(S.TASKS / S.TASK_ID)


def test_python_edit_applies_exactly_and_parses_back(repo: Path, task) -> None:
    edit = task.edits[1]  # money.py, two lines -> three
    command = cmds.python_edit(edit.path, edit.old, edit.new)
    assert cmds.parse_python_edit(command) == (edit.path, edit.old, edit.new)
    out = S.execute(repo, command)
    assert out["returncode"] == 0, out["output"]
    assert "src/shopcart/money.py: replaced 2 line(s) with 3" in out["output"]
    diff = S.git(repo, "diff", "--", edit.path)
    assert "-    return int(value * 100) / 100\n" in diff
    assert "+    quantized = Decimal(str(value)).quantize(CENT, rounding=ROUND_HALF_UP)\n" in diff
    assert "+    return float(quantized)\n" in diff
    # running it again finds no old text: fails loudly, file unchanged
    before = (repo / edit.path).read_text()
    again = S.execute(repo, command)
    assert again["returncode"] == 1
    assert "expected the old text exactly once, found it 0 times" in again["output"]
    assert (repo / edit.path).read_text() == before


def test_sed_edit_applies_one_line_changes_with_special_characters(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    line = "    x = a[0].b * c | d & e \\ f/g $h ^i\n"
    (repo / "f.py").write_text("first\n" + line + "last\n")
    new = "    x = a[1].b * c | d & e \\ f/g $h ^i  # fixed\n"
    command = cmds.sed_edit("f.py", line, new)
    assert command is not None
    assert S.execute(repo, command)["returncode"] == 0
    assert (repo / "f.py").read_text() == "first\n" + new + "last\n"
    assert cmds.sed_edit("f.py", "a\nb\n", "c\n") is None


def test_all_fixture_edits_fix_the_failing_tests(repo: Path, task) -> None:
    assert S.run_tests(repo).returncode != 0
    for e in task.edits:
        sed = cmds.sed_edit(e.path, e.old, e.new)
        assert S.execute(repo, sed or cmds.python_edit(e.path, e.old, e.new))["returncode"] == 0
    result = S.run_tests(repo)
    assert result.returncode == 0, result.stdout[-500:]


def test_wrong_first_leaves_a_test_failing(repo: Path, task) -> None:
    w = task.wrong_first
    assert S.execute(repo, cmds.python_edit(w.path, w.old, w.new))["returncode"] == 0
    assert S.run_tests(repo).returncode != 0


def test_python_edit_survives_awkward_text() -> None:
    old = "a = '''x'''\\n\nEOF\nb = 'it''s'\n"
    new = "a = 1\n"
    command = cmds.python_edit("p.py", old, new)
    assert cmds.parse_python_edit(command) == ("p.py", old, new)


@pytest.mark.parametrize(
    ("command", "path", "numbered"),
    [
        ("cat src/a.py", "src/a.py", False),
        ("cat -n ./src/a.py", "src/a.py", True),
        ("nl -ba src/a.py", "src/a.py", True),
        ("nl -ba src/a.py | sed -n '10,40p'", "src/a.py", True),
        ("sed -n '1,20p' src/a.py", "src/a.py", False),
        ("head -n 30 src/a.py", "src/a.py", False),
    ],
)
def test_reads_are_recognised(command: str, path: str, numbered: bool) -> None:
    read = cmds.parse_read(command)
    assert read is not None and (read.path, read.numbered) == (path, numbered)


@pytest.mark.parametrize("command", ["grep -rn foo .", "cat a.py b.py", "cat a.py | grep x", "ls -la"])
def test_non_reads_are_not(command: str) -> None:
    assert cmds.parse_read(command) is None


def test_classify_knows_every_step(task) -> None:
    kinds = {
        task.locate[0]: "locate",
        task.test: "test",
        cmds.submit_diff(("a.py",)): "submit_diff",
        cmds.CAT_PATCH: "submit_cat",
        cmds.SUBMIT: "submit_final",
        cmds.revert("src/shopcart/cart.py"): "revert",
        cmds.REVIEW: "review",
        "ls -la": "detour",
        cmds.read_command(ReadSpec("src/shopcart/cart.py", (1, 9)), 0, 1): "read",
        cmds.python_edit("x.py", "a", "b"): "edit",
        "echo hello": "other",
    }
    for command, kind in kinds.items():
        assert cmds.classify(command, task).kind == kind, command


def test_observation_reading() -> None:
    obs = "<returncode>0</returncode>\n<output>\n     1\tdef f():\n     2\t    return 1\n</output>"
    assert is_intact(obs) and returncode(obs) == 0 and outcome(obs) is True
    assert file_text(obs, numbered=True) == "def f():\n    return 1\n"
    assert not is_intact("[tool output deleted]") and returncode("[tool output deleted]") is None
    assert outcome("[tool output deleted]") is None
    # token-damaged: the return code or the wording still tells a careful reader
    assert returncode("<returncode1code>") == 1
    assert returncode("<return1code>\n<output") is None and outcome("code>1</return") is None
    assert returncode("returncode>1 garbled") == 1
    assert outcome("<out== 2 failed, 3 passed ==") is False


def test_long_output_keeps_head_and_tail(repo: Path) -> None:
    import jinja2

    template = jinja2.Template(S.mini_config("tool_calls")["model"]["observation_template"])
    obs = template.render(output={"output": "x\n" * 6000 + "TAIL\n", "returncode": 0, "exception_info": ""})
    assert is_intact(obs)
    assert "TAIL" in file_text(obs, numbered=False)


def test_fragments_and_piecing_together() -> None:
    old = "    total = price * qty\n    return round(total, 2)\n"
    text = "def f(price, qty):\n" + old + "\n"
    damaged_a = text.replace("price * qty", "price qty").replace("round(", "(")
    damaged_b = text.replace("total =", "=").replace("2)", ")")
    guess = fragment_guess(damaged_a, old)
    assert guess is not None and guess != old and "price qty" in guess
    assert not all(covered(old, [damaged_a]))
    assert not all(covered(old, [damaged_b]))
    assert all(covered(old, [damaged_a, damaged_b]))
    assert fragment_guess("nothing alike here", old) is None


def test_task_book_matches_statements(task) -> None:
    book = TaskBook.load(S.TASKS)
    assert book.identify("Consider this:\n" + "  ".join(task.problem_statement.split()) + "\nend") == task
    assert book.identify("an unrelated task") is None


def test_bad_knowledge_is_one_line_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(ResourceError, match="no such tasks directory"):
        TaskBook.load(tmp_path / "none")
    d = tmp_path / "t" / "demo__x-1"
    d.mkdir(parents=True)
    (d / "instance.json").write_text('{"instance_id": "demo__x-1", "problem_statement": "broken"}')
    with pytest.raises(ResourceError, match=r"solution\.yaml: missing"):
        TaskBook.load(tmp_path / "t")
    raw = yaml.safe_load((S.TASKS / S.TASK_ID / "solution.yaml").read_text())
    raw["edits"][0]["new"] = raw["edits"][0]["old"]
    (d / "solution.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(ResourceError, match=r"edits\[0\]\.new"):
        TaskBook.load(tmp_path / "t")
    raw = yaml.safe_load((S.TASKS / S.TASK_ID / "solution.yaml").read_text())
    raw["read"] = [{"path": "a.py", "lines": [5, 2]}]
    (d / "solution.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(ResourceError, match=r"read\[0\]\.lines"):
        TaskBook.load(tmp_path / "t")


def test_settings_check_their_values() -> None:
    assert ScriptedSettings.from_mapping({"detour_rate": 1, "seed": 3}).detour_rate == 1.0
    with pytest.raises(ConfigError, match=r"model\.scripted\.detour_rate: expected a probability"):
        ScriptedSettings.from_mapping({"detour_rate": 1.5})
    with pytest.raises(ConfigError, match=r"model\.scripted\.bogus: unknown key"):
        ScriptedSettings.from_mapping({"bogus": 1})
    with pytest.raises(ConfigError, match=r"read_attempts: expected an integer"):
        ScriptedSettings.from_mapping({"read_attempts": 0})
    with pytest.raises(ConfigError, match=r"reasoning_memory: expected true or false"):
        ScriptedSettings.from_mapping({"reasoning_memory": "yes"})


def test_schema_defaults_match_the_settings() -> None:
    props = load_schema()["properties"]["model"]["properties"]["scripted"]["properties"]
    defaults = ScriptedSettings.from_mapping()
    assert set(props) == set(defaults.__dataclass_fields__)
    for key, spec in props.items():
        assert spec["default"] == getattr(defaults, key), key


def test_config_readme_documents_every_key(repo_root: Path) -> None:
    readme = (repo_root / "config" / "README.md").read_text()
    for key in ScriptedSettings.__dataclass_fields__:
        assert f"| `{key}` |" in readme, key


def test_prefix_cache_counts_full_leading_blocks() -> None:
    cache = PrefixCache(max_blocks=100)
    a = list(range(40))  # blocks [0:16], [16:32]; 8 tokens left over
    assert cache.lookup_and_store(a) == 0
    assert cache.lookup_and_store(a + [99] * 10) == 32  # both blocks of a hit
    assert cache.lookup_and_store(a) == 32  # 39 hittable tokens hold 2 full blocks
    assert cache.lookup_and_store(a[:32]) == 16  # the last token is always computed
    b = [7, *a[1:]]  # first block differs: the chain breaks at once
    assert cache.lookup_and_store(b) == 0
    c = [*a[:16], 5, *a[17:]]  # second block differs
    assert cache.lookup_and_store([*c, 1]) == 16


def test_prefix_cache_evicts_least_recently_used() -> None:
    cache = PrefixCache(max_blocks=2)
    a, b = list(range(33)), list(range(100, 133))
    cache.lookup_and_store(a)
    cache.lookup_and_store(b)  # evicts a's blocks
    assert len(cache) == 2
    assert cache.lookup_and_store(a) == 0
    assert cache.lookup_and_store(a) == 32
