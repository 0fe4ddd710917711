"""``forgetting label`` on both mini-swe-agent formats, a Trae file and run directories;
and the loader on trajectories written by the real mini-swe-agent package."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest

from forgetting.behaviour import label_run
from forgetting.records.schemas import TOOL_CALLS_SCHEMA, read_dataset
from forgetting_testkit import trajectories


def test_label_toolcall_traj_to_parquet(tmp_path: Path, run_cli) -> None:
    traj = trajectories.write_json(tmp_path / "django__django-1.traj.json", trajectories.toolcall_trajectory())
    out = tmp_path / "rows.parquet"
    proc = run_cli("label", traj, "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert "tool_calls=10" in proc.stdout and "reads=7 refetches=3 rate=0.429" in proc.stdout
    table = read_dataset(out, TOOL_CALLS_SCHEMA)
    assert table.num_rows == 10
    assert table.column("label").to_pylist().count("read") == 7
    assert table.column("summary").to_pylist()[3] == "nl -ba a.py | sed -n '1,6p'"


def test_label_text_traj_to_csv(tmp_path: Path, run_cli) -> None:
    traj = trajectories.write_json(tmp_path / "old.traj.json", trajectories.text_trajectory())
    out = tmp_path / "rows.csv"
    proc = run_cli("label", traj, "--agent", "mini-text", "--out", out)
    assert proc.returncode == 0, proc.stderr
    with open(out, newline="") as fh:
        got = [(r["turn"], r["label"], r["is_refetch"]) for r in csv.DictReader(fh)]
    assert got == [
        ("1", "read", "false"),
        ("3", "read", "true"),
        ("4", "read", "false"),
        ("5", "search", ""),
        ("6", "submit", ""),
    ]


def test_label_prints_rows_without_out(tmp_path: Path, run_cli) -> None:
    traj = trajectories.write_json(tmp_path / "trae.json", trajectories.trae_trajectory())
    proc = run_cli("label", traj)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split("\t")[:4] == ["turn", "index", "tool", "label"]
    assert len(lines) == 1 + 7 + 1  # header, 7 tool calls, the summary line
    assert "agent=trae" in lines[-1] and "refetches=1" in lines[-1]


def test_label_run_directories(tmp_path: Path, run_cli) -> None:
    runs = tmp_path / "results" / "runs" / "mini"
    for config, deleted in (("baseline", {}), ("immediate-turn-tool_output-100", {2: [trajectories.deletion(1)]})):
        run = runs / config / "demo__t1" / "1"
        trajectories.write_json(run / "trajectory.json", trajectories.toolcall_trajectory())
        trajectories.write_call_log(run / "calls.jsonl", deleted)
        trajectories.write_run_json(run, status="submitted", turns=10)
    out = tmp_path / "rows.parquet"
    proc = run_cli("label", tmp_path / "results", "--out", out)
    assert proc.returncode == 0, proc.stderr
    summaries = [ln for ln in proc.stdout.splitlines() if ln.startswith("mini/")]
    assert [s.split(":")[0] for s in summaries] == [
        "mini/baseline/demo__t1/1",
        "mini/immediate-turn-tool_output-100/demo__t1/1",
    ]
    assert "refetches_deleted=0 refetches_kept=3" in summaries[0]
    assert "refetches_deleted=1 refetches_kept=2" in summaries[1]
    assert "outputs_deleted=1 (1 re-fetched) outputs_kept=5 (2 re-fetched)" in summaries[1]
    table = read_dataset(out, TOOL_CALLS_SCHEMA)
    assert sorted(set(table.column("run_id").to_pylist())) == [
        "mini/baseline/demo__t1/1",
        "mini/immediate-turn-tool_output-100/demo__t1/1",
    ]
    # one run directory on its own
    proc = run_cli("label", runs / "baseline" / "demo__t1" / "1")
    assert proc.returncode == 0 and proc.stdout.splitlines()[-1].startswith("mini/baseline/demo__t1/1: ")


def test_label_errors_are_one_line(tmp_path: Path, run_cli) -> None:
    bad = trajectories.write_json(tmp_path / "x.json", {"foo": 1})
    proc = run_cli("label", bad)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("error: ") and "unknown trajectory format" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    text = trajectories.write_json(tmp_path / "a.traj.json", trajectories.text_trajectory())
    proc = run_cli("label", text, "--out", tmp_path / "x.txt")
    assert proc.returncode == 2 and "expected a .parquet or .csv" in proc.stderr
    proc = run_cli("label", tmp_path / "missing")
    assert proc.returncode == 2 and "no such file" in proc.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = run_cli("label", empty)
    assert proc.returncode == 2 and "no run directory or trajectory file" in proc.stderr


# --- trajectories written by the real mini-swe-agent ---------------------------------------

COMMANDS = [
    "cat a.py",
    "grep -n def a.py",
    "sed -i 's/return 1/return 10/' a.py",
    "nl -ba a.py | sed -n '1,6p'",
    "cat b.py",
    "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT",
]


@pytest.fixture
def mini_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MSWEA_SILENT_STARTUP", "1")
    monkeypatch.setenv("MSWEA_CONFIGURED", "true")
    monkeypatch.setenv("MSWEA_GLOBAL_CONFIG_DIR", str(tmp_path / "mswea"))
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    work = tmp_path / "repo"
    work.mkdir()
    (work / "a.py").write_text(trajectories.A_PY)
    (work / "b.py").write_text(trajectories.B_PY)
    return work


def _run_mini(work: Path, text_mode: bool, out: Path) -> dict:
    """Run mini-swe-agent's own DefaultAgent and LocalEnvironment with its packaged prompt
    config; the model is mini-swe-agent's DeterministicModel test double replaying COMMANDS."""
    import minisweagent
    import yaml
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.environments.local import LocalEnvironment
    from minisweagent.models.test_models import (
        DeterministicModel,
        DeterministicToolcallModel,
        make_output,
        make_toolcall_output,
    )

    cfg = yaml.safe_load(
        (
            Path(minisweagent.__file__).parent
            / "config"
            / ("mini_textbased.yaml" if text_mode else "mini.yaml")
        ).read_text()
    )
    if text_mode:
        outputs = [
            make_output(f"Step {i}.\n\n```mswea_bash_command\n{c}\n```", [{"command": c}])
            for i, c in enumerate(COMMANDS)
        ]
        model = DeterministicModel(outputs=outputs, observation_template=cfg["model"]["observation_template"])
    else:
        outputs = [
            make_toolcall_output(
                f"Step {i}.",
                [
                    {
                        "id": f"call_{i}",
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"command": c})},
                    }
                ],
                [{"command": c, "tool_call_id": f"call_{i}"}],
            )
            for i, c in enumerate(COMMANDS)
        ]
        model = DeterministicToolcallModel(
            outputs=outputs, observation_template=cfg["model"]["observation_template"]
        )
    agent = DefaultAgent(
        model,
        LocalEnvironment(cwd=str(work)),
        system_template=cfg["agent"]["system_template"],
        instance_template=cfg["agent"]["instance_template"],
        step_limit=20,
        cost_limit=0,
        output_path=out,
    )
    return agent.run("Make f return 10.")


@pytest.mark.parametrize("text_mode", [False, True], ids=["toolcall", "text"])
def test_real_mini_swe_agent_trajectory(mini_env: Path, tmp_path: Path, text_mode: bool, run_cli) -> None:
    out = tmp_path / "run.traj.json"
    status = _run_mini(mini_env, text_mode, out)
    assert status["exit_status"] == "Submitted"
    result = label_run(out)
    assert result.agent == ("mini-text" if text_mode else "mini")
    assert list(result.labels) == ["read", "search", "edit", "read", "read", "submit"]
    reads = [r for r in result.table.to_pylist() if r["is_read"]]
    # cat a.py: 4 lines; nl -ba after the edit: {def f():, return 10, def g():, return 2},
    # 3 of 4 seen = 0.75 → not a re-fetch; cat b.py: 3 new lines
    assert [(r["turn"], r["n_distinct_lines"], r["overlap"], r["is_refetch"]) for r in reads] == [
        (1, 4, 0.0, False),
        (4, 4, 0.75, False),
        (5, 3, 0.0, False),
    ]
    assert result.summary["capped"] is False and result.turns == 6
    proc = run_cli("label", out)
    assert proc.returncode == 0 and "refetches=0" in proc.stdout, proc.stderr
    assert os.path.getsize(out) > 0


def test_label_refuses_a_torn_call_log_unless_allowed(tmp_path: Path, run_cli) -> None:
    run = tmp_path / "runs" / "mini" / "immediate-turn-tool_output-100" / "demo__t1" / "1"
    trajectories.write_json(run / "trajectory.json", trajectories.toolcall_trajectory())
    calls = trajectories.write_call_log(run / "calls.jsonl", {2: [trajectories.deletion(1)]})
    trajectories.write_run_json(run, status="submitted", turns=10)
    data = calls.read_bytes()
    start = data.rstrip(b"\n").rfind(b"\n") + 1
    calls.write_bytes(data[: start + 25])  # the proxy was killed while writing the last call
    line = data[:start].count(b"\n") + 1
    proc = run_cli("label", run)
    assert proc.returncode == 2 and proc.stdout == ""
    (err,) = proc.stderr.strip().splitlines()
    assert err.startswith(f"error: {calls}: line {line} is torn") and "--allow-torn" in err
    proc = run_cli("label", run, "--allow-torn")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == (
        f"warning: {calls}: the call log is torn at line {line}; took the deletions of the 9 calls read before it"
    )
    assert "refetches_deleted=1" in proc.stdout.splitlines()[-1]
    # a bare trajectory with --call-log too
    traj = trajectories.write_json(tmp_path / "t.traj.json", trajectories.toolcall_trajectory())
    proc = run_cli("label", traj, "--call-log", calls)
    assert proc.returncode == 2 and f"{calls}: line {line} is torn" in proc.stderr
