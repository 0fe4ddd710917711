"""The runner's parts without running an agent: statuses, run directories, mini-swe-agent's
settings, Trae agent's config file and exact command line, config checks, the CLI's errors."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import yaml

from forgetting.agents import TRAE_COMMIT, action_syntax, config_path, load_config
from forgetting.foundation.errors import ConfigError, RunOutputError
from forgetting.foundation.layout import RUN_JSON
from forgetting.records import parse_trae, read_run_record
from forgetting.run import mini, trae
from forgetting.run.batch import served_model
from forgetting.run.context import RunContext
from forgetting.run.outcome import classify_mini
from forgetting.run.rundir import OUTCOME_FILE, finalize, remove_stale, stale_dirs, temp_dir_for
from forgetting.run.scripted_backend import scripted_command
from forgetting.run.workspace import Workspace
from forgetting.study.plan import plan_runs
from forgetting.study.runner import RunnerSettings
from forgetting_testkit.runner import TASKS, runner_settings, study_at
from forgetting_testkit.sif import write_sif
from forgetting_testkit.trajectories import run_record

# ------------------------------------------------------------------ statuses


class APIConnectionError(Exception):  # stands for litellm's class of that name (matched by name)
    pass


class ContextWindowExceededError(Exception):
    pass


class BadRequestError(Exception):
    pass


@pytest.mark.parametrize(
    ("exit_status", "exception", "status"),
    [
        ("Submitted", None, "submitted"),
        ("LimitsExceeded", None, "capped"),
        ("TimeExceeded", None, "error"),
        ("RepeatedFormatError", None, "error"),
        ("ContextWindowExceededError", ContextWindowExceededError("too long"), "context_exceeded"),
        ("BadRequestError", BadRequestError("This model's maximum context length is 262144 tokens"),
         "context_exceeded"),
        ("BadRequestError", BadRequestError("unknown field 'foo'"), "error"),
        ("APIConnectionError", APIConnectionError("Connection refused"), "infra"),
        ("RuntimeError", RuntimeError("template broke"), "error"),
    ],
)
def test_mini_exit_statuses_map_to_run_statuses(exit_status, exception, status):
    got, error = classify_mini(exit_status, exception)
    assert got == status
    assert (error is None) == (status in ("submitted", "capped", "context_exceeded"))


@pytest.mark.parametrize(
    ("data", "exit_code", "status", "exit_status"),
    [
        ({"success": True, "llm_interactions": [{}]}, 0, "submitted", "Submitted"),
        ({"success": False, "final_result": "Task execution exceeded maximum steps without completion."}, 0,
         "capped", "LimitsExceeded"),
        ({"success": False, "agent_steps": [{"error": "Error code: 400 - maximum context length exceeded"}]}, 0,
         "context_exceeded", "ContextWindowExceeded"),
        ({"success": False, "agent_steps": [{"error": None}, {"error": "Connection error."}]}, 0,
         "infra", "ModelUnavailable"),
        ({"success": False, "agent_steps": [{"error": "bash tool crashed"}]}, 0, "error", "Error"),
        (None, 1, "error", "NoTrajectory"),
    ],
)
def test_trae_trajectory_maps_to_run_statuses(data, exit_code, status, exit_status):
    got, got_exit, _ = trae.classify(trae_file(data), exit_code, timed_out=False)
    assert (got, got_exit) == (status, exit_status)


def trae_file(data: dict | None):
    """Trae's trajectory as the runner reads it (the one Trae parse); a fresh file has no calls yet."""
    return None if data is None else parse_trae({"llm_interactions": [], **data}, Path("trajectory.json"))


def test_the_runner_reads_trae_trajectories_with_the_one_trae_parse(tmp_path):
    """What Trae left is read as every later stage reads it: a field no stage could read is a
    one-line error (the run ends as an ``error`` with it), not a status guessed around it."""
    path = tmp_path / "trajectory.json"
    assert trae._read_trajectory(path) is None  # none written: NoTrajectory
    path.write_text(json.dumps({"llm_interactions": [1], "success": True}))
    with pytest.raises(RunOutputError, match=rf"^{path}: llm_interactions\[0\] is the number 1, expected an object"):
        trae._read_trajectory(path)
    path.write_text(json.dumps({"llm_interactions": [{}, {}], "success": False, "agent_steps": [{"error": "boom"}]}))
    traj = trae._read_trajectory(path)
    assert traj is not None and len(traj.interactions) == 2
    assert trae.classify(traj, 1, False) == ("error", "Error", "boom")


def test_trae_run_over_its_time_limit_is_an_error():
    assert trae.classify(trae_file({"success": True}), -9, timed_out=True)[:2] == ("error", "TimeExceeded")


# ------------------------------------------------------------------ run directories


def test_temporary_and_leftover_directories_of_a_run(tmp_path):
    final = tmp_path / "runs" / "mini" / "baseline" / "t" / "1"
    final.parent.mkdir(parents=True)
    temp = temp_dir_for(final, 4242)
    assert temp == final.parent / ".1.tmp-4242"
    leftovers = [temp, final.parent / ".1.old-77"]
    others = [final.parent / ".10.tmp-5", final.parent / "10", final.parent / ".2.tmp-6"]
    for d in leftovers + others:
        d.mkdir()
    assert stale_dirs(final) == sorted(leftovers)
    assert remove_stale([final]) == sorted(leftovers)
    assert all(not d.exists() for d in leftovers) and all(d.exists() for d in others)


def test_finalize_writes_run_json_last_and_replaces_an_older_run(tmp_path):
    final = tmp_path / "1"
    final.mkdir()
    (final / "old.txt").write_text("old")
    temp = temp_dir_for(final, 1)
    temp.mkdir()
    (temp / "calls.jsonl").write_text("{}\n")
    (temp / OUTCOME_FILE).write_text("{}")
    record = run_record("mini/baseline/t/1", turns=3)
    finalize(temp, final, record)
    assert sorted(p.name for p in final.iterdir()) == ["calls.jsonl", RUN_JSON]
    assert read_run_record(final / RUN_JSON) == record
    assert not temp.exists() and [p.name for p in tmp_path.iterdir()] == ["1"]


# ------------------------------------------------------------------ mini-swe-agent


def test_mini_uses_its_own_swebench_configs_with_the_study_limits(tmp_path):
    settings = runner_settings(agent={"turn_cap": 60}, execution={"run_timeout_s": 900},
                               model={"backend": "scripted", "name": "x", "served_name": "scripted",
                                      "temperature": 0, "max_tokens": 4096})
    assert config_path("mini").name == "swebench.yaml"
    assert config_path("mini-text").name == "swebench_backticks.yaml"
    config = load_config("mini")
    model = mini.model_config(config, settings, "http://127.0.0.1:9999/v1")
    assert model["model_name"] == "hosted_vllm/scripted"
    assert model["model_kwargs"] == {"drop_params": True, "parallel_tool_calls": True,
                                     "api_base": "http://127.0.0.1:9999/v1", "api_key": "not-needed",
                                     "temperature": 0.0, "max_tokens": 4096}
    assert model["cost_tracking"] == "ignore_errors"
    assert model["observation_template"] == config["model"]["observation_template"]  # mini's own
    agent = mini.agent_config(config, settings, tmp_path / "trajectory.json")
    assert (agent["step_limit"], agent["cost_limit"], agent["wall_time_limit_seconds"]) == (60, 0, 900)
    assert agent["instance_template"] == config["agent"]["instance_template"]


def test_the_action_pattern_is_the_agents_own(tmp_path):
    """What the proxy keeps as an action is what mini-swe-agent would execute: mini (tool
    calls) none; mini-text the action_regex of the model the runner builds, from the config
    it runs with — its own swebench_backticks.yaml (the package default) or the study's file."""
    from minisweagent.models.litellm_textbased_model import LitellmTextbasedModelConfig

    assert action_syntax("mini") is None and action_syntax("trae") is None
    default = action_syntax("mini-text")
    assert default.regex == LitellmTextbasedModelConfig.model_fields["action_regex"].default
    assert "action_regex" not in (load_config("mini-text")["model"])
    own = tmp_path / "mine.yaml"
    config = load_config("mini-text")
    config["model"]["action_regex"] = r"```run\s*\n(.*?)\n```"
    own.write_text(yaml.safe_dump(config))
    custom = action_syntax("mini-text", own)
    assert (custom.regex, custom.source) == (r"```run\s*\n(.*?)\n```", f"{own}: model.action_regex")
    assert custom.commands("why\n```bash\nls\n```\n```run\nmake\n```") == ["make"]
    config["model"]["action_regex"] = "```(unclosed"
    own.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError, match=r"agent.mini-text.config_file: .*mine.yaml: model.action_regex: "):
        action_syntax("mini-text", own)


def test_mini_local_shell_gets_this_python_first_and_no_bytecode(monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    config = load_config("mini")
    env = mini.shell_env(config, local=True)
    assert env["PATH"].split(os.pathsep)[:2] == [str(Path(sys.executable).parent), "/usr/bin"]
    assert env["PYTHONDONTWRITEBYTECODE"] == "1" and env["PYTHONPATH"] == ""
    assert "BASH_ENV" not in env and env["PAGER"] == "cat"
    # in the instance image mini's own environment stays as it is (conda activation via BASH_ENV)
    assert mini.shell_env(config, local=False) == config["environment"]["env"]


# ------------------------------------------------------------------ Trae agent


def _trae_ctx(tmp_path: Path, settings: RunnerSettings, local: bool) -> RunContext:
    run = next(r for r in plan_runs(study_at(tmp_path, agents=["trae"])) if r.repeat == 1)
    ws = Workspace(run.task, path=tmp_path / "repo") if local else Workspace(run.task, image=Path("/img/t.sif"))
    return RunContext(run, settings, tmp_path / "out", tmp_path / "scratch", ws, "fix it", "http://127.0.0.1:4100/v1")


def test_trae_config_points_its_chat_completions_provider_at_the_proxy():
    settings = runner_settings(agent={"turn_cap": 200},
                               model={"backend": "vllm", "name": "Qwen/Qwen3-Coder-30B-A3B-Instruct",
                                      "served_name": "qwen3-coder", "temperature": 0, "max_tokens": 8192})
    config = trae.trae_config(settings, "http://127.0.0.1:4100/v1")
    agent = config["agents"]["trae_agent"]
    assert agent == {"enable_lakeview": False, "model": "study_model", "max_steps": 200,
                     "tools": ["bash", "str_replace_based_edit_tool", "sequentialthinking", "task_done"]}
    model = config["models"]["study_model"]
    assert (model["model"], model["temperature"], model["max_tokens"]) == ("qwen3-coder", 0.0, 8192)
    provider = config["model_providers"][model["model_provider"]]
    assert provider == {"provider": "openrouter", "base_url": "http://127.0.0.1:4100/v1", "api_key": "not-needed"}
    assert yaml.safe_load(yaml.safe_dump(config)) == config


def test_trae_runs_a_replys_tool_calls_one_after_another():
    """Trae runs a reply's tool calls concurrently under ``parallel_tool_calls: true``, and its
    bash tool is one shell session: two bash calls in one reply then fail ("Session has not
    started"), garble each other's output, and leave the session hung for the rest of the run
    (seen with the real trae-cli at the pinned commit). The setting is Trae's own: the model
    is not told."""
    model = trae.trae_config(runner_settings(), "http://127.0.0.1:4100/v1")["models"]["study_model"]
    assert model["parallel_tool_calls"] is False


def test_trae_local_runs_have_the_demo_shell_of_mini_swe_agent(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/pipeline/src")
    env = trae.agent_env(local=True, fixed_test_durations=True)
    assert env["PYTEST_ADDOPTS"] == "-p forgetting_fixed_duration" and env["PYTHONPATH"].endswith("pytest_plugins")
    assert env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] == "1" and env["PATH"].startswith(str(Path(sys.executable).parent))
    assert trae.agent_env(local=True)["PYTHONPATH"] == ""  # the task's code only, not this pipeline's
    assert trae.agent_env(local=False)["PYTHONPATH"] == "/pipeline/src"  # the container starts clean


def test_trae_command_line_inside_the_instance_image(tmp_path):
    # an image as `apptainer build` lays it out: its root file system is descriptor 4
    image = write_sif(tmp_path / "img" / "trae.sif", "amd64", definition="Bootstrap: docker\n")
    settings = runner_settings(evaluation={"apptainer": {"executable": "apptainer"}},
                               agent={"trae": {"apptainer_image": str(image)}})
    ctx = _trae_ctx(tmp_path, settings, local=False)
    out = str(ctx.out)
    assert trae.command(ctx) == [
        "apptainer", "exec", "--contain", "--cleanenv", "--fakeroot", "--writable-tmpfs",
        "--no-home", "--pwd", "/testbed",
        "--bind", f"{out}:/forgetting-run",
        "--bind", f"{image}:/opt/trae-agent:id=4,image-src=/opt/trae-agent",
        "--env", "BASH_ENV=/root/.bashrc",
        "/img/t.sif",
        "/opt/trae-agent/bin/trae-cli", "run",
        "--file", "/forgetting-run/task.txt",
        "--working-dir", "/testbed",
        "--config-file", "/forgetting-run/trae_config.yaml",
        "--must-patch",
        "--patch-path", "/forgetting-run/patch.diff",
        "--trajectory-file", "/forgetting-run/trajectory.json",
        "--console-type", "simple",
    ]
    settings = runner_settings(agent={"trae": {"install_dir": "/shared/trae-agent"}})
    assert "/shared/trae-agent:/opt/trae-agent:ro" in trae.command(_trae_ctx(tmp_path, settings, local=False))


def test_trae_command_line_on_a_local_checkout(tmp_path):
    settings = runner_settings(agent={"trae": {"executable": "/usr/local/bin/trae-cli"}})
    ctx = _trae_ctx(tmp_path, settings, local=True)
    cmd = trae.command(ctx)
    assert cmd[:2] == ["/usr/local/bin/trae-cli", "run"]
    assert cmd[cmd.index("--working-dir") + 1] == str(tmp_path / "repo")
    assert cmd[cmd.index("--patch-path") + 1] == f"{ctx.out}/patch.diff"


def test_trae_environment_drops_the_provider_variables_trae_prefers_to_its_config(monkeypatch):
    monkeypatch.setenv("OPENROUTER_BASE_URL", "https://openrouter.ai/api/v1")
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-real")
    env = trae.agent_env(local=True)
    assert "OPENROUTER_BASE_URL" not in env and "OPENROUTER_API_KEY" not in env


def test_trae_on_swebench_tasks_needs_its_image(tmp_path):
    settings = runner_settings(dataset={"kind": "swebench"})
    with pytest.raises(ConfigError, match=r"agent\.trae: give apptainer_image"):
        trae.check_ready(settings)
    settings = runner_settings(dataset={"kind": "swebench"},
                               agent={"trae": {"apptainer_image": str(tmp_path / "no.sif")}})
    with pytest.raises(ConfigError, match=r"no\.sif not found"):
        trae.check_ready(settings)
    assert TRAE_COMMIT == "e839e559ac61bdd0e057c375dd1dee391fee797d"


# ------------------------------------------------------------------ config and model server


def test_runner_settings_from_a_study(tmp_path):
    study = study_at(tmp_path, agent={"turn_cap": 12, "command_timeout_s": 5,
                                      "trae": {"apptainer_image": "$HOME/trae.sif", "max_retries": 1}},
                     execution={"concurrency": 3, "run_timeout_s": 600, "scratch_dir": str(tmp_path / "s")})
    s = study.runner
    assert (s.turn_cap, s.command_timeout_s, s.concurrency, s.run_timeout_s) == (12, 5, 3, 600)
    assert s.scratch_dir == tmp_path / "s" and s.instances == TASKS and s.dataset_kind == "demo"
    assert s.trae.apptainer_image == Path(os.environ["HOME"]) / "trae.sif" and s.trae.max_retries == 1
    assert s.kill_after_s == 660


@pytest.mark.parametrize(
    ("agent", "message"),
    [
        ({"trae": {"image": "x.sif"}}, "agent.trae"),
        ({"trae": {"apptainer_image": "a.sif", "install_dir": "/opt"}}, "not both"),
        ({"mini": {"config_file": "nowhere.yaml"}}, "agent.mini.config_file"),
    ],
)
def test_bad_agent_settings_are_one_line_errors(tmp_path, agent, message):
    with pytest.raises(ConfigError, match=message):
        study_at(tmp_path, agent=agent)  # checked when the study is loaded, not when a batch starts


def test_the_scripted_model_server_gets_the_study_settings_and_the_demo_tasks(tmp_path):
    study = study_at(tmp_path, model={"backend": "scripted", "name": "s", "served_name": "stand-in",
                                      "scripted": {"wrong_first_rate": 1.0, "seed": 3}})
    model = served_model(study, study.runner)
    cmd = scripted_command(model, host="127.0.0.1", port=8001, seed=7)
    assert cmd[cmd.index("--tasks") + 1] == str(TASKS)
    assert cmd[cmd.index("--seed") + 1] == "3"
    assert cmd[cmd.index("--served-name") + 1] == "stand-in"
    assert json.loads(cmd[cmd.index("--settings") + 1])["wrong_first_rate"] == 1.0
    assert "tasks" not in json.loads(cmd[cmd.index("--settings") + 1])


def test_run_command_rejects_a_run_id_outside_the_plan(run_cli, tmp_path):
    from forgetting_testkit.runner import write_study

    config = write_study(tmp_path)
    done = run_cli("run", config, "--run-id", "mini/baseline/demo__confkit-1/9")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: --run-id 'mini/baseline/demo__confkit-1/9' is not a run of {config} "
        f"(see `forgetting plan {config}`)"
    ]
    done = run_cli("run-batch", config, "--batch", "mini/baseline/b999-00000000")
    assert done.returncode == 2 and "is not a batch of" in done.stderr


# ------------------------------------------------------------------ SWE-bench tasks (cluster path)


# mini's SingularityEnvironment.__del__ fails on an object whose sandbox build failed (its own quirk)
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_swebench_tasks_work_in_their_instance_image(tmp_path, monkeypatch):
    from forgetting.run.outcome import InfraFailure
    from forgetting.run.workspace import make_workspace, problem_statement

    rows = tmp_path / "verified.jsonl"
    row = {"instance_id": "django__django-11099", "problem_statement": "UsernameValidator"}
    rows.write_text(json.dumps(row) + "\n")
    images = tmp_path / "sif"
    images.mkdir()
    settings = runner_settings(
        dataset={"kind": "swebench", "instances": str(rows)}, agent={"command_timeout_s": 30},
        evaluation={"image_dir": str(images), "apptainer": {"executable": str(tmp_path / "apptainer")}},
    )
    assert problem_statement(settings, "django__django-11099") == "UsernameValidator"
    with pytest.raises(InfraFailure, match=r"django__django-11099\.sif not found"):
        make_workspace(settings, "django__django-11099", "mini/baseline/django__django-11099/1")
    (images / "django__django-11099.sif").write_text("image")
    ws = make_workspace(settings, "django__django-11099", "mini/baseline/django__django-11099/1")
    assert not ws.local and ws.cwd == "/testbed" and ws.image == images / "django__django-11099.sif"

    # mini-swe-agent's own Apptainer environment, its sandbox built in the run's scratch directory
    calls = tmp_path / "calls.txt"
    fake = tmp_path / "apptainer"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n[ "$1" = build ] && mkdir -p "$3"\nexit $FAKE_STATUS\n')
    fake.chmod(0o755)
    monkeypatch.setenv("FAKE_STATUS", "0")
    run = plan_runs(study_at(tmp_path / "study"))[0]
    ctx = RunContext(run, settings, tmp_path / "out", tmp_path / "scratch", ws, "fix it", "http://127.0.0.1:1/v1")
    (tmp_path / "scratch").mkdir()
    config = load_config("mini")
    env = mini._environment(ctx, config)
    assert type(env).__name__ == "SingularityEnvironment"
    assert (env.config.image, env.config.cwd, env.config.timeout) == (str(ws.image), "/testbed", 30)
    assert env.config.env["BASH_ENV"] == "/root/.bashrc" and env.config.executable == str(fake)
    assert env.sandbox_dir.parent == tmp_path / "scratch"
    assert calls.read_text().split()[:2] == ["build", "--sandbox"]
    env.cleanup()
    monkeypatch.setenv("FAKE_STATUS", "1")
    with pytest.raises(InfraFailure, match="apptainer sandbox"):
        mini._environment(ctx, config)


def test_demo_workspaces_have_reproducible_paths(tmp_path):
    from forgetting.run.workspace import make_workspace, workspace_dir
    from forgetting_testkit.checkout import ROOT

    settings = runner_settings(execution={"scratch_dir": str(tmp_path)},
                               dataset={"kind": "demo", "instances": str(ROOT / "resources/demo/tasks")})
    rid = "mini/baseline/demo__timekit-1/1"
    assert workspace_dir(settings, rid) == workspace_dir(settings, rid)  # no pid, no random name
    assert workspace_dir(settings, rid) != workspace_dir(settings, rid[:-1] + "2")
    stale = workspace_dir(settings, rid) / "leftover"
    stale.mkdir(parents=True)  # a killed attempt's checkout
    ws = make_workspace(settings, "demo__timekit-1", rid)
    assert ws.path == workspace_dir(settings, rid) and (ws.path / ".git").is_dir() and not stale.exists()
    # `ls -la` in a fresh checkout prints the same time stamps on any day
    from forgetting.run.workspace import DEMO_EPOCH

    stamps = {p.stat().st_mtime for p in [ws.path, ws.path.parent, *ws.path.rglob("*")]}
    assert stamps == {DEMO_EPOCH}
    ws.remove()
    assert not workspace_dir(settings, rid).parent.exists()


def test_fixed_test_durations_take_the_wall_clock_out_of_pytest_output(tmp_path):
    import subprocess

    (tmp_path / "test_a.py").write_text("def test_a():\n    assert True\n")
    for fixed, expected in ((False, " passed in 0."), (True, "1 passed in <duration not shown>")):
        env = {**os.environ, **mini.shell_env({}, local=True, fixed_test_durations=fixed)}
        out = subprocess.run([sys.executable, "-m", "pytest", "-q", "test_a.py"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=60).stdout
        assert expected in out, out


def test_fixed_test_durations_take_memory_addresses_out_of_pytest_output(tmp_path):
    """An assertion on an object with the default repr prints its address, which differs
    between two runs of the same demo task; the demo's plugin writes it as 0x<address>."""
    import re
    import subprocess

    (tmp_path / "test_b.py").write_text(
        "class Settings:\n    pass\n\n\ndef test_b():\n    assert Settings() == 1\n"
    )
    outs = {}
    for fixed in (False, True):
        env = {**os.environ, **mini.shell_env({}, local=True, fixed_test_durations=fixed)}
        outs[fixed] = subprocess.run([sys.executable, "-m", "pytest", "-q", "test_b.py"], cwd=tmp_path, env=env,
                                     capture_output=True, text=True, timeout=60).stdout
    assert re.search(r"Settings object at 0x[0-9a-f]{8,}", outs[False]), outs[False]
    assert "Settings object at 0x<address>" in outs[True], outs[True]
    assert not re.search(r"0x[0-9a-f]{8,}", outs[True]), outs[True]
