"""config/README.md's key tables are generated from the config schema and kept up to date."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

from forgetting.foundation.config_schema import load_schema
from forgetting.study.config_reference import COMMAND, README, listed_keys, render, table
from forgetting_testkit.checkout import cli_env

ROOT = Path(__file__).resolve().parent.parent


def _all_keys(schema, path=""):
    for key, sub in (schema.get("properties") or {}).items():
        yield f"{path}{key}"
        yield from _all_keys(sub, f"{path}{key}.")
    if isinstance(schema.get("items"), dict):
        yield from _all_keys(schema["items"], f"{path[:-1]}[].")


def test_config_readme_is_up_to_date_with_the_schema():
    text = README.read_text(encoding="utf-8")
    assert render(text) == text, f"config/README.md is out of date with the config schema; regenerate it: {COMMAND}"


def test_every_key_of_the_schema_has_a_row():
    listed = listed_keys(README.read_text(encoding="utf-8"))
    assert sorted(set(_all_keys(load_schema())) - listed) == []


def _row(generated: str, key: str) -> str:
    return next(line for line in generated.splitlines() if line.startswith(f"| `{key}` |"))


def test_a_row_is_made_of_the_schema_and_follows_it():
    schema = copy.deepcopy(load_schema())
    spec = schema["properties"]["execution"]["properties"]["proxy"]["properties"]["retries"]
    row = _row(table(["execution.proxy"], set(), schema), "retries")
    assert row == f"| `retries` | integer in [0, {spec['maximum']}] | 4 | {spec['description']} |"
    spec.update(default=7, maximum=9, description="tries | again")
    row = _row(table(["execution.proxy"], set(), schema), "retries")
    assert row == "| `retries` | integer in [0, 9] | 7 | tries \\| again |"
    del spec["maximum"]
    row = _row(table(["execution.proxy"], set(), schema), "retries")
    assert row == "| `retries` | integer ≥ 0 | 7 | tries \\| again |"


def test_defaults_by_another_key_and_aliases_are_shown_once():
    rows = table(["tasks", "dataset"], set()) + table(["agent"], set())
    assert "| `dataset.instances` | text | `demo`: `resources/demo/tasks`; `swebench`: " in rows
    assert "| `mini.config_file`, `mini-text.config_file` | text |" in rows
    # a nested object with a table of its own gets one row here, not its keys
    assert "`proxy.retries`" not in table(["execution"], {"execution.proxy"})


def test_check_names_the_command_that_regenerates(tmp_path):
    stale = tmp_path / "README.md"
    text = README.read_text(encoding="utf-8")
    stale.write_text(text.replace("| integer in [0, 100] | 4 |", "| integer in [0, 100] | 5 |", 1))
    module = [sys.executable, "-m", "forgetting.study.config_reference"]
    done = subprocess.run([*module, "--check", str(stale)], capture_output=True, text=True, env=cli_env())
    assert done.returncode == 1 and COMMAND in done.stderr
    done = subprocess.run([*module, "--write", str(stale)], capture_output=True, text=True, env=cli_env())
    assert done.returncode == 0 and stale.read_text(encoding="utf-8") == README.read_text(encoding="utf-8")
    done = subprocess.run([*module, "--check", str(README)], capture_output=True, text=True, env=cli_env())
    assert done.returncode == 0, done.stderr
