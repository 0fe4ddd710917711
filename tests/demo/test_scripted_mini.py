"""End to end: real mini-swe-agent 2.4.6 (DefaultAgent, LitellmModel / LitellmTextbasedModel,
LocalEnvironment, its own SWE-bench configs) drives the scripted model over HTTP and submits
a patch that fixes the fixture task's failing tests, in both message styles."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from forgetting.demo.scripted import SEED_HEADER, ScriptedModelServer
from forgetting_testkit import scripted as S


@pytest.fixture
def mini_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("MSWEA_SILENT_STARTUP", "1")
    monkeypatch.setenv("MSWEA_CONFIGURED", "true")
    monkeypatch.setenv("MSWEA_GLOBAL_CONFIG_DIR", str(tmp_path / "mswea-config"))
    monkeypatch.setenv("MSWEA_COST_TRACKING", "ignore_errors")


def run_mini(style: str, api_base: str, repo: Path, seed: str) -> tuple[dict[str, Any], Any]:
    import litellm
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.environments.local import LocalEnvironment
    from minisweagent.models.litellm_model import LitellmModel
    from minisweagent.models.litellm_textbased_model import LitellmTextbasedModel

    litellm.suppress_debug_info = True
    config = S.mini_config(style)
    model_cfg = config["model"]
    model_cls = LitellmModel if style == "tool_calls" else LitellmTextbasedModel
    model = model_cls(
        model_name="openai/scripted",
        model_kwargs={
            **model_cfg.get("model_kwargs", {}),
            "api_base": api_base,
            "api_key": "not-needed",
            "extra_headers": {SEED_HEADER: seed},
        },
        observation_template=model_cfg["observation_template"],
        format_error_template=model_cfg["format_error_template"],
        cost_tracking="ignore_errors",
    )
    env_cfg = config["environment"]
    env = LocalEnvironment(
        cwd=str(repo),
        env={k: v for k, v in env_cfg.get("env", {}).items() if k != "BASH_ENV"}
        | {"PATH": S.shell_env()["PATH"]},
        timeout=env_cfg.get("timeout", 60),
    )
    agent = DefaultAgent(model, env, **{**config["agent"], "step_limit": 40})
    result = agent.run(task=S.problem_statement())
    return result, agent


@pytest.mark.slow
@pytest.mark.parametrize("style", ["tool_calls", "text"])
def test_real_mini_swe_agent_resolves_the_fixture_task(mini_env: None, tmp_path: Path, style: str) -> None:
    repo = S.checkout(tmp_path / "repo")
    settings = S.CALM.replace(wrong_first_rate=1.0)  # the longer path: wrong guess, test, revert, fix
    with ScriptedModelServer(S.TASKS, settings=settings) as server:
        result, agent = run_mini(style, server.url, repo, seed=f"e2e-{style}")
    assert result["exit_status"] == "Submitted"
    submission = result["submission"]
    assert "+++ b/src/shopcart/cart.py" in submission and "+++ b/src/shopcart/money.py" in submission
    # the submitted patch, applied to a fresh checkout, fixes the failing tests
    fresh = S.checkout(tmp_path / "fresh")
    assert S.run_tests(fresh).returncode != 0
    subprocess.run(["git", "apply", "-"], input=submission, text=True, cwd=fresh, check=True)
    outcome = S.run_tests(fresh)
    assert outcome.returncode == 0, outcome.stdout[-800:]
    # the conversation shows both the wrong first guess being reverted and mini's message style
    roles = {m["role"] for m in agent.messages}
    assert ("tool" in roles) == (style == "tool_calls")
    commands = [a.get("command", "") for m in agent.messages for a in m.get("extra", {}).get("actions", [])]
    assert "git checkout -- src/shopcart/cart.py" in commands
    assert agent.n_calls < 40
