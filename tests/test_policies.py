"""Policies in a study config (``configurations.policies``) and the policy registry."""

from __future__ import annotations

import re

import pytest
import yaml

from forgetting.config import load_schema, load_study
from forgetting.deletion import (
    DEFAULT_PLACEHOLDERS,
    DeletionSettings,
    configurable_policies,
    make_policy,
    policies,
)
from forgetting.errors import ConfigError
from forgetting.grid import Deletion
from forgetting.policies import build_policies


def test_unknown_policy_is_one_line_listing_the_known_ones():
    with pytest.raises(ConfigError) as err:
        build_policies([{"name": "x", "policy": "cache-magic"}], key="configurations.policies")
    msg = str(err.value)
    assert "\n" not in msg
    assert msg == "configurations.policies[0].policy: unknown policy 'cache-magic'; known policies: random"
    assert configurable_policies() == ["random"]  # the baseline's "none" is not selectable here
    assert set(policies()) == {"none", "random"}


def test_random_policy_with_other_amounts_and_delays():
    (d,) = build_policies(
        [
            {
                "name": "delayed4-turn-tool_output-60",
                "policy": "random",
                "scope": "tool_output",
                "granularity": "turn",
                "amount": 60,
                "keep_last": 4,
            }
        ],
        key="k",
    )
    assert d == Deletion(
        name="delayed4-turn-tool_output-60",
        policy="random",
        scope="tool_output",
        granularity="turn",
        amount=60.0,
        keep_last=4,
        timing="delayed",
    )
    (e,) = build_policies(
        [
            {
                "name": "t",
                "policy": "random",
                "scope": "both",
                "granularity": "token",
                "amount": 10,
                "timing": "immediate",
            }
        ],
        key="k",
    )
    assert e.keep_last == 0


@pytest.mark.parametrize(
    ("entry", "fragment"),
    [
        (
            {"scope": "thoughts"},
            "k[0].scope: 'thoughts' is not allowed; allowed values: reasoning, tool_output, both",
        ),
        ({"amount": 0}, "k[0].amount: 0 must be a number in (0, 100]"),
        ({"amount": 120}, "k[0].amount: 120 must be a number in (0, 100]"),
        ({"keep_last": -1}, "k[0].keep_last: -1 must be an integer >= 0"),
        ({"keep_last": None, "timing": None}, "k[0]: give keep_last"),
        ({"batch": 3}, "k[0].batch: unknown key for policy 'random'"),
    ],
)
def test_bad_random_entries_name_the_key(entry, fragment):
    base = {
        "name": "p",
        "policy": "random",
        "scope": "both",
        "granularity": "turn",
        "amount": 50,
        "keep_last": 2,
    }
    full = {k: v for k, v in {**base, **entry}.items() if v is not None}
    with pytest.raises(
        ConfigError,
        match="^" + re.escape(fragment),
    ):
        build_policies([full], key="k")


def test_a_study_config_with_a_policy(tmp_path, repo_root):
    cfg = yaml.safe_load((repo_root / "config" / "config.yaml").read_text())
    cfg["configurations"] = {
        "names": ["delayed-turn-tool_output-50"],
        "policies": [
            {
                "name": "delayed-turn-tool_output-60",
                "policy": "random",
                "scope": "tool_output",
                "granularity": "turn",
                "amount": 60,
                "keep_last": 2,
            }
        ],
    }
    for section, key in (("tasks", "ids_file"), ("dataset", "known_ids"), ("dataset", "instances")):
        cfg[section][key] = str(repo_root / cfg[section][key])
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(cfg))
    study = load_study(path)
    assert [d.name for d in study.configurations] == [
        "baseline",
        "delayed-turn-tool_output-50",
        "delayed-turn-tool_output-60",
    ]
    assert study.configuration("delayed-turn-tool_output-60").amount == 60.0
    cfg["configurations"]["policies"][0]["policy"] = "magic"
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError, match=r"configurations.policies\[0\].policy: unknown policy 'magic'"):
        load_study(path)


def test_make_policy_rejects_an_unknown_policy():
    with pytest.raises(ConfigError, match="unknown policy 'nope'; known policies: none, random"):
        make_policy(Deletion(name="x", policy="nope"))


def test_default_placeholders_and_draw_match_the_config_schema():
    props = load_schema()["properties"]["deletion"]["properties"]
    assert {k: v["default"] for k, v in props["placeholders"]["properties"].items()} == DEFAULT_PLACEHOLDERS
    assert props["token_draw"]["default"] == DeletionSettings().token_draw == "exact"
    with pytest.raises(ConfigError, match=r"deletion\.token_draw: 'sometimes' is not allowed"):
        DeletionSettings.from_config({"token_draw": "sometimes"})
