"""The labeller against the hand-labelled sample, and the rules table as data."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from forgetting.behaviour.rules import RulesError, load_rules
from forgetting_testkit.checkout import ROOT

SAMPLE = ROOT / "tests" / "data" / "labelled_tool_calls.yaml"


def _sample() -> list[dict]:
    return yaml.safe_load(SAMPLE.read_text(encoding="utf-8"))


def _predict(rules, entry: dict) -> str:
    if "cmd" in entry:
        return rules.label_tool(entry["agent"], "bash", {"command": entry["cmd"]}, entry.get("output", ""))
    return rules.label_tool(entry["agent"], entry["tool"], entry.get("args") or {}, entry.get("output", ""))


def test_labelled_sample_precision() -> None:
    rules = load_rules()
    sample = _sample()
    assert len(sample) >= 150
    assert {e["class"] for e in sample} == set(rules.classes)
    assert {e["agent"] for e in sample} == {"mini", "mini-text", "trae"}
    predicted = Counter()
    correct = Counter()
    misses = []
    for e in sample:
        got = _predict(rules, e)
        predicted[got] += 1
        if got == e["class"]:
            correct[got] += 1
        else:
            misses.append(f"  {e.get('cmd') or e.get('tool')!r}: labelled {e['class']}, predicted {got}")
    print(f"\nlabeller precision on {len(sample)} hand-labelled tool calls:")
    for c in rules.classes:
        if predicted[c]:
            print(f"  {c:<7} {correct[c]:>3}/{predicted[c]:<3} = {correct[c] / predicted[c]:.3f}")
    overall = sum(correct.values()) / len(sample)
    print(f"  overall {sum(correct.values())}/{len(sample)} = {overall:.3f}")
    print("\n".join(misses))
    assert overall >= 0.98, "\n".join(misses)


@pytest.mark.parametrize(
    ("command", "label"),
    [
        ("cd /repo && nl -ba pkg/mod.py | sed -n '10,40p'", "read"),  # cd prefix, pipe into a filter
        ("cat pkg/mod.py | grep -n def", "search"),  # a read narrowed by grep
        ("cat pkg/mod.py | grep -v '^#'", "read"),  # grep -v keeps the content
        ("grep -rn foo . | head -5", "search"),
        ("sed -n '5,9p' a.py && sed -i 's/x/y/' a.py", "edit"),  # edit beats read
        ("python -m pytest -q && echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "submit"),
        ("ls && grep -rn foo .", "search"),
        ("X=1 Y=2 timeout -s KILL 30 python run.py", "test"),  # env prefix, wrapper with options
        ("sh -c 'cat a.py'", "read"),
        ("bash <<'EOF'\nsed -i 's/a/b/' f.py\nEOF", "edit"),  # a here-document script
        ("python - <<'PY'\nprint(open('a.py').read())\nPY", "test"),  # reads only: a run
        ("echo hi > /dev/null", "other"),
        ("python x.py > out.log 2>&1", "test"),  # logging a run is not an edit
        ("if [ -f a.py ]; then cat a.py; fi", "read"),
        ("(cd sub && python -m pytest) 2>&1 | tail -3", "test"),
        ("find . -name '*.py' | xargs sed -i 's/a/b/'", "edit"),
        ("", "other"),
    ],
)
def test_shell_chains(command: str, label: str) -> None:
    assert load_rules().label_shell(command) == label


def test_rules_are_data_a_researcher_can_extend(tmp_path: Path) -> None:
    import importlib.resources as ir

    table = yaml.safe_load((ir.files("forgetting") / "data" / "label_rules.yaml").read_text())
    assert load_rules().label_shell("wc -l a.py") == "other"
    # a researcher decides that line counts are searches: one row, no code
    table["shell"]["commands"].insert(0, {"command": "wc", "class": "search"})
    custom = tmp_path / "rules.yaml"
    custom.write_text(yaml.safe_dump(table))
    assert load_rules(custom).label_shell("wc -l a.py") == "search"
    assert load_rules(custom).label_shell("cat a.py") == "read"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda t: t["shell"]["commands"].append({"comand": "x", "class": "read"}),
            r"shell.commands\[\d+\]: unknown key 'comand'",
        ),
        (
            lambda t: t["shell"]["commands"].append({"command": "x", "class": "reading"}),
            "class 'reading' is not one of",
        ),
        (
            lambda t: t["shell"]["commands"].append({"command": "x", "args_match": "(", "class": "read"}),
            "bad regular expression",
        ),
        (lambda t: t.update(precedence=["read"]), "precedence must list every class"),
        (
            lambda t: t["tools"]["trae"].append({"tool": "x"}),
            r"tools.trae\[.*exactly one of 'class' or 'shell'",
        ),
    ],
)
def test_bad_rules_table_is_one_line_error(tmp_path: Path, mutate, message: str) -> None:
    import importlib.resources as ir

    table = yaml.safe_load((ir.files("forgetting") / "data" / "label_rules.yaml").read_text())
    mutate(table)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(table))
    with pytest.raises(RulesError, match=message) as info:
        load_rules(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_unknown_agent_is_user_error() -> None:
    from forgetting.foundation.errors import UserError

    with pytest.raises(UserError, match="unknown agent 'swe-agent'"):
        load_rules().label_tool("swe-agent", "bash", {"command": "ls"})


def test_shell_parser_structure() -> None:
    from forgetting.behaviour.shell import parse

    pipelines = parse(
        "cd /r && cat <<'EOF' > f.py\nx = '&& not an operator'\nEOF\npython f.py 2>&1 | tail -3 # done"
    )
    words = [[c.words for c in p.commands] for p in pipelines]
    assert words == [[["cd", "/r"]], [["cat"]], [["python", "f.py"], ["tail", "-3"]]]
    cat = pipelines[1].commands[0]
    assert cat.stdin_text == "x = '&& not an operator'" and cat.writes_file
    py = pipelines[2].commands[0]
    assert [(r.fd, r.op, r.target) for r in py.redirects] == [("2", ">&", "1")] and not py.writes_file
    assert parse('grep "a|b" x; echo $(ls | wc -l)')[0].commands[0].words == ["grep", "a|b", "x"]
    assert parse('echo "a \\"q\\" b"')[0].commands[0].words == ["echo", 'a "q" b']
    assert parse("(cd x && pytest) | tail")[-1].continues_group


def test_label_options_from_the_study_config(repo_root: Path, tmp_path: Path) -> None:
    import importlib.resources as ir

    from forgetting.foundation.errors import ConfigError
    from forgetting.study.config import load_study

    rules = tmp_path / "my_rules.yaml"
    rules.write_text((ir.files("forgetting") / "data" / "label_rules.yaml").read_text())
    analysis = {"refetch_threshold": 0.7, "looping_window": 5, "label_rules": str(rules)}
    study = load_study(repo_root / "config" / "config.yaml", {"analysis": analysis})
    opts = study.analysis.label_options()
    assert opts["threshold"] == 0.7 and opts["looping_window"] == 5
    assert opts["rules"] == rules
    assert opts["turn_cap"] == study.agent.turn_cap
    # a missing or broken table stops the config, naming the key
    for bad in (tmp_path / "missing.yaml", tmp_path / "broken.yaml"):
        if bad.name == "broken.yaml":
            bad.write_text("classes: [read]\n")
        with pytest.raises(ConfigError, match=r"analysis\.label_rules: .*" + bad.name):
            load_study(repo_root / "config" / "config.yaml", {"analysis": {"label_rules": str(bad)}})


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet=st.sampled_from(list("ab -|&;<>()'\"\\$`#\n=/{}*0123456789EOFcatsedpy")), max_size=80)
)
def test_any_command_line_gets_one_class(text: str) -> None:
    rules = load_rules()
    assert rules.label_shell(text) in rules.classes


def test_a_run_without_tool_calls(tmp_path: Path) -> None:
    import json

    from forgetting.behaviour import label_run

    path = tmp_path / "empty.traj.json"
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    path.write_text(json.dumps({"info": {"exit_status": "LimitsExceeded"}, "messages": messages}))
    result = label_run(path)
    assert result.table.num_rows == 0
    assert result.summary["n_reads"] == 0 and result.summary["refetch_rate"] is None
    assert result.summary["median_refetch_distance"] is None
