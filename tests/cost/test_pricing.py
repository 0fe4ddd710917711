"""Price sheets: the shipped profiles, and one-line errors for bad ones."""

from __future__ import annotations

import pytest

from forgetting.cost.pricing import load_profile, load_profiles
from forgetting.foundation.errors import ResourceError

GOOD = """\
per_million_tokens:
  input: 1.0
  cached_input: 0.1
  output: 4.0
"""


def test_shipped_profiles(repo_root):
    d = repo_root / "resources" / "pricing"
    paper, blocks, minimum, ttl = load_profiles(
        d, ["paper", "vllm-blocks", "min-prefix", "write-premium-ttl"]
    )
    assert (paper.input, paper.cached_input, paper.output, paper.cache_write) == (0.45, 0.09, 2.25, 0.45)
    assert (paper.min_prefix, paper.increment, paper.ttl_s, paper.capacity_tokens) == (0, 1, None, None)
    assert (blocks.increment, blocks.recompute_last_token) == (16, True)
    assert [blocks.round_hit(n) for n in (15, 16, 31, 32)] == [0, 16, 16, 32]
    assert (minimum.min_prefix, minimum.increment) == (1024, 128)
    assert [minimum.round_hit(n) for n in (1023, 1024, 1151, 1152, 1279, 1280)] == [
        0,
        1024,
        1024,
        1152,
        1152,
        1280,
    ]
    assert (ttl.cache_write, ttl.ttl_s) == (0.5625, 300.0)


def test_a_new_profile_is_a_file(tmp_path):
    (tmp_path / "mine.yaml").write_text(GOOD + "cache:\n  increment: 64\n  capacity_tokens: 1000\n")
    (p,) = load_profiles(tmp_path, ["mine"])
    assert (p.name, p.cache_write, p.increment, p.capacity_tokens) == ("mine", 1.0, 64, 1000)
    (q,) = load_profiles(None, [str(tmp_path / "mine.yaml")])  # a path works too
    assert q == p


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (GOOD.replace("input: 1.0", "input: -1.0"), "per_million_tokens.input must be ≥ 0"),
        (GOOD.replace("output: 4.0", "output: -0.5"), "per_million_tokens.output must be ≥ 0"),
        (GOOD + "  cache_write: -2\n", "per_million_tokens.cache_write must be ≥ 0"),
        (GOOD.replace("  cached_input: 0.1\n", ""), "missing field per_million_tokens.cached_input"),
        ("cache: {}\n", "missing field per_million_tokens"),
        (GOOD + "discount: 3\n", "unknown key 'discount'"),
        (GOOD.replace("output:", "outptu:"), "unknown key 'per_million_tokens.outptu'"),
        (GOOD + "cache:\n  ttl: 5\n", "unknown key 'cache.ttl'"),
        (GOOD.replace("1.0", "cheap"), "per_million_tokens.input must be a number"),
        (GOOD + "cache:\n  increment: 0\n", "cache.increment must be ≥ 1"),
        (GOOD + "cache:\n  min_prefix: 2.5\n", "cache.min_prefix must be an integer"),
        (GOOD + "cache:\n  ttl_s: 0\n", "cache.ttl_s must be > 0"),
        (GOOD + "cache:\n  capacity_tokens: 0\n", "cache.capacity_tokens must be ≥ 1"),
        (
            GOOD + "cache:\n  recompute_last_token: yes please\n",
            "cache.recompute_last_token must be true or false",
        ),
        ("per_million_tokens: [1, 2]\n", "per_million_tokens must be a mapping"),
        ("- 1\n", "a price sheet must be a mapping"),
        ("per_million_tokens: {input: 1\n", "not valid YAML"),
    ],
)
def test_bad_price_sheets_are_one_line_errors_naming_file_and_field(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ResourceError) as err:
        load_profile(path)
    line = str(err.value)
    assert "\n" not in line
    assert line.startswith(f"{path}: ")
    assert message in line


def test_unknown_and_duplicate_profiles(tmp_path):
    (tmp_path / "a.yaml").write_text(GOOD)
    with pytest.raises(ResourceError, match=r"no pricing profile 'b'; available in .*: a"):
        load_profiles(tmp_path, ["b"])
    with pytest.raises(ResourceError, match="named twice"):
        load_profiles(tmp_path, ["a", "a"])


def test_profiles_from_a_study_config(repo_root, tmp_path):
    from forgetting.foundation.errors import ConfigError
    from forgetting.study.config import load_study
    from forgetting.study.sections import PricingSettings

    study = load_study(repo_root / "config" / "config.yaml")
    profiles, primary = study.pricing.profiles, study.pricing.primary
    names = ["paper", "vllm-blocks", "min-prefix", "write-premium-ttl"]  # every shipped profile is validated
    assert (primary, [p.name for p in profiles]) == ("paper", names)
    pricing = PricingSettings.from_section({"primary": "vllm-blocks", "profiles": ["paper"]}, root=repo_root)
    assert [p.name for p in pricing.profiles] == ["vllm-blocks", "paper"] == list(pricing.names)
    with pytest.raises(ConfigError, match=r"pricing\.dir"):
        PricingSettings.from_section({"dir": str(tmp_path / "none")}, root=repo_root)
