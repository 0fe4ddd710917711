"""Policies in a study config (``configurations.policies``) and the policy registry."""

from __future__ import annotations

import re

import pytest
import yaml

from forgetting.deletion import (
    DEFAULT_PLACEHOLDERS,
    DeletionSettings,
    configurable_policies,
    make_policy,
    policies,
)
from forgetting.deletion.names import canonical_name, name_entry, policy_from_name, policy_label
from forgetting.deletion.policy import PolicyContext
from forgetting.foundation.errors import ConfigError
from forgetting.grid import Deletion
from forgetting.study.config import load_schema, load_study
from forgetting.study.policies import build_policies

#: what the policies read of a study that gives no agent or pricing section (the schema's)
POLICY_DEFAULTS = PolicyContext.from_parts()


def test_unknown_policy_is_one_line_listing_the_known_ones():
    with pytest.raises(ConfigError) as err:
        build_policies([{"name": "x", "policy": "cache-magic"}], key="configurations.policies", context=POLICY_DEFAULTS)
    msg = str(err.value)
    assert "\n" not in msg
    assert msg == (
        "configurations.policies[0].policy: unknown policy 'cache-magic'; "
        "known policies: batch, gate, mask, random, reuse"
    )
    assert configurable_policies() == ["batch", "gate", "mask", "random", "reuse"]  # not the baseline's "none"
    assert set(policies()) == {"none", "random", "batch", "gate", "reuse", "mask"}


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
        key="k", context=POLICY_DEFAULTS
    )
    assert d == Deletion(
        name="delayed4-turn-tool_output-60",
        policy="random",
        scope="tool_output",
        granularity="turn",
        amount=60.0,
        keep_last=4,
        timing=None,  # delayed and immediate are the paper's delays 2 and 0 only
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
        key="k", context=POLICY_DEFAULTS
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
        ({"keep_last": 8, "timing": "delayed"}, "k[0].timing: 'delayed' means keep_last 2, but keep_last is 8"),
        ({"name": "baseline"}, "k[0].name: 'baseline' is the uncompressed reference"),
        ({"name": "delayed-turn-both-25"}, "k[0].name: 'delayed-turn-both-25' reads as another configuration"),
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
        build_policies([full], key="k", context=POLICY_DEFAULTS)


def _write_study(tmp_path, cfg, repo_root, *paths: tuple[str, str]):
    """``cfg`` as ``tmp_path/study.yaml``, the files it names at ``paths`` (section, key) made
    absolute against the repository."""
    for section, key in paths:
        cfg[section][key] = str(repo_root / cfg[section][key])
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


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
    path = _write_study(tmp_path, cfg, repo_root, ("tasks", "ids_file"), ("dataset", "known_ids"),
                        ("dataset", "instances"))
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
    with pytest.raises(ConfigError, match="unknown policy 'nope'; known policies: batch, gate, mask, none, random"):
        make_policy(Deletion(name="x", policy="nope"), DeletionSettings.from_section())


def test_default_placeholders_and_draw_match_the_config_schema():
    props = load_schema()["properties"]["deletion"]["properties"]
    assert {k: v["default"] for k, v in props["placeholders"]["properties"].items()} == DEFAULT_PLACEHOLDERS
    assert props["token_draw"]["default"] == DeletionSettings.from_section().token_draw == "exact"
    with pytest.raises(ConfigError, match=r"deletion\.token_draw: 'sometimes' is not allowed"):
        DeletionSettings.from_section({"token_draw": "sometimes"})


# ---------------------------------------------------------------------------------------------
# names: every policy's scheme writes and reads its configurations


NAMES = {
    "keep8-turn-tool_output-100": {"policy": "random", "keep_last": 8, "amount": 100.0},
    "keep16-token-both-12.5": {"policy": "random", "keep_last": 16, "amount": 12.5, "scope": "both"},
    "delayed-turn-tool_output-60": {"policy": "random", "keep_last": 2, "timing": "delayed"},
    "batch4-delayed-turn-tool_output-100": {"policy": "batch", "keep_last": 2, "params": {"every": 4}},
    "batch2-keep5-token-reasoning-50": {"policy": "batch", "keep_last": 5, "timing": None},
    "gate-delayed-turn-tool_output-100": {"policy": "gate", "keep_last": 2},
    "gate10-immediate-token-both-50": {"policy": "gate", "keep_last": 0, "timing": "immediate"},
    "reuse4-delayed": {"policy": "reuse", "keep_last": 2, "params": {"stale_after": 4}, "amount": None},
    "reuse6-keep3": {"policy": "reuse", "keep_last": 3, "scope": "tool_output"},
    "mask10": {"policy": "mask", "keep_last": 10, "scope": "tool_output", "amount": 100.0},
}


@pytest.mark.parametrize(("name", "expect"), NAMES.items())
def test_every_policy_name_reads_back_to_its_configuration(name, expect):
    d = policy_from_name(name, "k", context=POLICY_DEFAULTS)
    assert d.name == name and canonical_name(d) == name
    for field, value in expect.items():
        got = getattr(d, field)
        assert (dict(got) | value == dict(got)) if field == "params" else got == value, field
    # the entry the name stands for, without a name, gets the same name and configuration
    (again,) = build_policies([name_entry(name)], "k", context=POLICY_DEFAULTS)
    assert again == d
    assert policy_label(name, d.as_dict()) not in ("", name)  # tables label it by its policy


def test_gate_names_leave_pricing_to_the_study():
    d = policy_from_name("gate10-delayed-turn-both-50", "k", PolicyContext.from_parts({"agent": {"turn_cap": 60}}))
    assert d.params["horizon"] == 10 and d.params["turn_cap"] == 60 and d.params["pricing"] == "paper"
    assert policy_from_name("gate-delayed-turn-both-50", "k", context=POLICY_DEFAULTS).params["horizon"] is None


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("keep2-turn-both-50", "write 'keep2' as 'delayed' (keep_last 2)"),
        ("batch4-delayed-turn-both", "is not a batch name; expected batch{k}-{retention}-"),
        ("batch1-delayed-turn-both-50", "k.every: 1 must be an integer >= 2"),
        ("gate0-delayed-turn-both-50", "k.horizon: 0 must be an integer >= 1"),
        ("reuse4", "is not a reuse name; expected reuse{N}-{retention}"),
        ("reuse0-delayed", "k.stale_after: 0 must be an integer >= 1"),
        ("mask4-delayed", "is not a mask name; expected mask{M}"),
        ("keep8-turn-thoughts-50", "unknown scope 'thoughts'"),
        ("keep8-line-both-50", "unknown granularity 'line'"),
        ("keep8-turn-both-0", "k.amount: 0 must be a number in (0, 100]"),
        ("forget-everything", "is not a configuration name (batch: batch{k}-"),
    ],
)
def test_bad_policy_names_say_what_is_wrong(name, fragment):
    with pytest.raises(ConfigError) as err:
        policy_from_name(name, "k", context=POLICY_DEFAULTS)
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_an_entry_without_name_gets_its_canonical_one_and_a_free_label_is_kept():
    entries = [
        {"policy": "batch", "every": 3, "scope": "both", "granularity": "token", "amount": 25, "timing": "immediate"},
        {"policy": "mask", "keep_last": 6, "name": "observation-masking"},
    ]
    a, b = build_policies(entries, "k", context=POLICY_DEFAULTS)
    assert a.name == "batch3-immediate-token-both-25" and b.name == "observation-masking"
    assert b.policy == "mask" and policy_label("observation-masking", b.as_dict()) == "observation-masking"


@pytest.mark.parametrize(
    ("entry", "fragment"),
    [
        ({"policy": "batch", "every": 4, "scope": "both", "granularity": "turn", "amount": 50}, "k[0]: give keep_last"),
        ({"policy": "reuse", "stale_after": 3, "keep_last": 2, "scope": "both"}, "k[0].scope: unknown key"),
        ({"policy": "mask", "keep_last": -1}, "k[0].keep_last: -1 must be an integer >= 0"),
        ({"policy": "mask", "keep_last": 2, "amount": 50}, "k[0].amount: unknown key for policy 'mask'"),
        (
            {"policy": "gate", "horizon": "soon", "scope": "both", "granularity": "turn", "amount": 5, "keep_last": 0},
            "k[0].horizon: 'soon' must be an integer >= 1",
        ),
    ],
)
def test_bad_entries_of_the_other_policies_name_the_key(entry, fragment):
    with pytest.raises(ConfigError, match="^" + re.escape(fragment)):
        build_policies([entry], key="k", context=POLICY_DEFAULTS)


def test_policy_names_in_configurations_names(tmp_path, repo_root):
    cfg = yaml.safe_load((repo_root / "config" / "demo.yaml").read_text())
    cfg["configurations"] = {
        "names": ["delayed-turn-tool_output-100", "keep8-turn-tool_output-100", "gate5-delayed-turn-both-50"],
        "policies": [{"policy": "mask", "keep_last": 4}],
    }
    cfg["agent"] = {"turn_cap": 40}
    cfg["pricing"] = {"dir": str(repo_root / "resources/pricing"), "primary": "write-premium-ttl"}
    path = _write_study(tmp_path, cfg, repo_root, ("tasks", "ids_file"), ("dataset", "instances"))
    study = load_study(path)
    assert [d.name for d in study.configurations] == [
        "baseline",
        "delayed-turn-tool_output-100",
        "keep8-turn-tool_output-100",
        "gate5-delayed-turn-both-50",
        "mask4",
    ]
    gate = study.configuration("gate5-delayed-turn-both-50")
    assert gate.params["turn_cap"] == 40 and gate.params["pricing"] == "write-premium-ttl"
    cfg["configurations"]["names"].append("mask4")  # the same configuration twice
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError, match="configurations: 'mask4' is listed twice"):
        load_study(path)


def test_the_shipped_configs_run_policies_beyond_the_paper(repo_root):
    study = load_study([repo_root / "config" / "config.yaml", repo_root / "config" / "policies.yaml"])
    beyond = [d for d in study.deletion_configurations if not d.is_paper]
    assert [d.name for d in beyond] == [
        "keep4-turn-tool_output-100",
        "keep8-turn-tool_output-100",
        "keep16-turn-tool_output-100",
        "batch4-delayed-turn-tool_output-100",
        "reuse8-delayed",
        "gate20-delayed-turn-tool_output-100",
        "mask10",
    ]
    demo = load_study(repo_root / "config" / "demo.yaml")
    assert [d.policy for d in demo.deletion_configurations if not d.is_paper] == ["batch", "reuse", "gate"]
    assert demo.configuration("gate10-delayed-turn-tool_output-100").params["turn_cap"] == 60
