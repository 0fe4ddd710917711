"""The agents' own facts (forgetting.agents), stated once and checked against the agents."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from forgetting.agents import MINI_CONFIGS, MINI_SUBMIT_MARKER, config_path, prepare_environment

SRC = Path(__file__).resolve().parent.parent / "src" / "forgetting"


def test_mini_swe_agent_ends_a_run_at_the_submit_marker(tmp_path: Path):
    """Its environment reads our marker as a submission and hands back what follows it."""
    prepare_environment(tmp_path / "mswea")
    from minisweagent.environments.local import LocalEnvironment
    from minisweagent.exceptions import Submitted

    with pytest.raises(Submitted) as raised:
        LocalEnvironment(cwd=str(tmp_path)).execute({"command": f"echo {MINI_SUBMIT_MARKER} && echo the-patch"})
    assert raised.value.messages[0]["extra"]["submission"] == "the-patch\n"


@pytest.mark.parametrize("agent", sorted(MINI_CONFIGS))
def test_mini_swe_agent_configs_submit_with_the_marker(agent: str):
    """The configs the study runs ask the model to submit with exactly this marker."""
    config = yaml.safe_load(config_path(agent).read_text(encoding="utf-8"))
    assert f"echo {MINI_SUBMIT_MARKER} && cat patch.txt" in config["agent"]["instance_template"]


def test_the_marker_is_written_in_one_module():
    writers = sorted(
        str(p.relative_to(SRC)) for p in SRC.rglob("*.py")
        if p.name != "agents.py" and re.search(MINI_SUBMIT_MARKER, p.read_text(encoding="utf-8"))
    )
    assert writers == []
