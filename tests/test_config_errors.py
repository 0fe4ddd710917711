"""Every bad config is rejected before any job starts: one line naming the key, status 2."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import yaml

from forgetting_testkit.checkout import ROOT, cli_env


def paper_config() -> dict:
    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def with_change(path: str, value):
    cfg = copy.deepcopy(paper_config())
    node = cfg
    keys = path.split(".")
    for k in keys[:-1]:
        node = node.setdefault(k, {})
    node[keys[-1]] = value
    return cfg


BAD = {
    "unknown agent": (with_change("agents", ["trae", "gpt-agent"]), ["agents[1]", "allowed values", "mini"]),
    "unknown scope": (
        with_change("configurations.filter", {"scope": ["thoughts"]}),
        ["configurations.filter.scope[0]", "reasoning, tool_output, both"],
    ),
    "unknown granularity": (
        with_change("configurations.filter", {"granularity": ["line"]}),
        ["configurations.filter.granularity[0]", "turn, token"],
    ),
    "unknown timing": (
        with_change("configurations.filter", {"timing": ["later"]}),
        ["configurations.filter.timing[0]", "delayed, immediate"],
    ),
    "unknown scope in a name": (
        with_change("configurations.names", ["delayed-turn-thoughts-50"]),
        ["configurations.names[0]", "unknown scope", "reasoning, tool_output, both"],
    ),
    "unknown timing in a name": (
        with_change("configurations.names", ["eventually-turn-both-50"]),
        ["configurations.names[0]", "unknown timing", "delayed, immediate"],
    ),
    "amount zero": (with_change("configurations.filter", {"amount": [0]}), ["configurations.filter.amount[0]"]),
    "amount above 100": (
        with_change("configurations.names", ["delayed-turn-both-150"]),
        ["configurations.names[0]", "outside (0, 100]"],
    ),
    "token at 100 %": (
        with_change("configurations.names", ["delayed-token-both-100"]),
        ["configurations.names[0]", "token granularity at 100 %"],
    ),
    "token at 100 % by filter": (
        with_change("configurations.filter", {"granularity": ["token"], "amount": [100]}),
        ["configurations.filter", "token granularity at 100 %"],
    ),
    "duplicate task ids": (
        with_change("tasks", {"ids": ["django__django-11099", "django__django-11099"]}),
        ["tasks.ids", "duplicate", "django__django-11099"],
    ),
    "unknown task id": (
        with_change("tasks", {"ids": ["django__django-11099", "nope__nope-1"]}),
        ["tasks.ids", "unknown task id", "nope__nope-1"],
    ),
    "repeats below one": (with_change("repeats.baseline", 0), ["repeats.baseline", "minimum of 1"]),
    "missing task file": (
        with_change("tasks", {"ids_file": "resources/tasks/missing.txt"}),
        ["tasks.ids_file", "file not found", "missing.txt"],
    ),
    "missing known-ids file": (
        with_change("dataset.known_ids", "resources/tasks/gone.txt"),
        ["dataset.known_ids", "file not found", "gone.txt"],
    ),
    "unknown top-level key": (with_change("agentz", ["mini"]), ["agentz", "allowed keys"]),
    "only names an unknown configuration": (
        with_change("only", "delayed-turn-both-51"),
        ["only", "delayed-turn-both-51", "choose from"],
    ),
}


def assert_one_line_error(proc: subprocess.CompletedProcess[str], fragments: list[str]) -> None:
    assert proc.returncode != 0
    err = proc.stderr.strip()
    assert "Traceback" not in proc.stderr
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    for frag in fragments:
        assert frag in lines[0], (frag, lines[0])


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_config_is_one_line_error_naming_the_key(case, tmp_path, run_cli):
    cfg, fragments = BAD[case]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    # a config outside the checkout resolves relative paths against the working directory
    proc = run_cli("plan", path)
    assert proc.returncode == 2
    assert_one_line_error(proc, fragments)


def test_missing_config_file(run_cli, tmp_path):
    proc = run_cli("plan", tmp_path / "nope.yaml")
    assert_one_line_error(proc, ["nope.yaml", "not found"])


@pytest.mark.parametrize("case", ["unknown agent", "token at 100 %", "duplicate task ids"])
def test_snakemake_rejects_bad_config_before_any_job(case, tmp_path):
    cfg, fragments = BAD[case]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    proc = subprocess.run(
        [str(__import__("pathlib").Path(sys.executable).parent / "snakemake"), "-n", "-c1", "--configfile", str(path)],
        cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert any(all(f in line for f in fragments) for line in proc.stderr.splitlines()), proc.stderr
    assert not (tmp_path / "results").exists()
