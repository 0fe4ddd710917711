"""Hostile numbers: a number that is not finite (YAML ``.nan``, ``.inf``, ``-.inf``; ``nan`` on a
command line) is refused wherever a user can hand one in — every numeric key of the config
file, a ``--set`` override, a numeric option — with one line naming the key, before any work.
jsonschema's bounds cannot do it (every comparison with NaN is false), so the config's check
is one walk over the whole document at load (:func:`forgetting.foundation.config_schema.non_finite`).

Each case is counted in the hostile-input summary under its class (``tests/hostile/conftest.py``)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from forgetting_testkit.hostile import changed, demo_config, run_main, snapshot

NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
CLASS = "non-finite number"

#: the keys whose non-finite value had an effect on main 8c875c1 (issue 25, item 8): a wait that
#: never ends, a 27-hour sleep, tracebacks, dying proxy threads, checks silently switched off
EFFECTS = (
    "model.endpoint.address_wait_s", "execution.proxy.max_wait_s", "execution.proxy.connect_timeout_s",
    "execution.proxy.timeout_s", "statistics.confidence", "execution.proxy.jitter", "pricing.prompt_tolerance",
    "analysis.refetch_threshold",
)


def numeric_keys() -> Iterator[str]:
    """Every key of the config schema whose value is a number or an integer."""
    from forgetting.foundation.config_schema import load_schema

    def walk(node: dict[str, Any], path: tuple[str, ...]) -> Iterator[str]:
        for key, sub in (node.get("properties") or {}).items():
            if not isinstance(sub, dict):
                continue
            if sub.get("type") == "object" and sub.get("properties"):
                yield from walk(sub, (*path, key))
            elif sub.get("type") in ("number", "integer"):
                yield ".".join((*path, key))

    yield from walk(load_schema(), ())


def judge(tally: Any, surface: str, argv: list[str], roots: list[Path], *, says: tuple[str, ...]) -> None:
    """Run ``forgetting ARGV``: it must end in status 2 with one error line holding ``says``,
    no traceback, no hang, nothing below ``roots`` changed."""
    before = snapshot(*roots)
    outcome = run_main(argv)
    outcome.changed = changed(before, snapshot(*roots))
    found = tally.record(surface, outcome, expect="error", klass=CLASS)
    assert not found, f"{argv}: " + "; ".join(found)
    for fragment in says:
        assert fragment in outcome.stderr, outcome.stderr


KEYS = sorted(numeric_keys())


def test_the_sweep_holds_every_key_the_issue_saw_an_effect_of() -> None:
    assert set(EFFECTS) <= set(KEYS)


@pytest.mark.parametrize("spelling", sorted(NON_FINITE))
@pytest.mark.parametrize("key", KEYS)
def test_a_non_finite_number_in_the_config_file_is_one_line_naming_the_key(
    key: str, spelling: str, tmp_path: Path, tally: Any
) -> None:
    config = demo_config(tmp_path, **{key: NON_FINITE[spelling]})
    assert "." + spelling.lstrip("-") in config.read_text()  # the YAML spelling: .nan, .inf, -.inf
    judge(tally, "plan", ["plan", str(config), "--out", str(tmp_path / "runs.parquet")], [tmp_path],
          says=(key, "not a finite number"))


@pytest.mark.parametrize("spelling", [".nan", ".inf", "-.inf", ".NaN", ".Inf"])
@pytest.mark.parametrize("key", EFFECTS)
def test_a_non_finite_number_in_a_set_override_is_one_line_naming_the_key(
    key: str, spelling: str, tmp_path: Path, tally: Any
) -> None:
    top, *rest = key.split(".")
    value = spelling
    for part in reversed(rest):
        value = f"{{{part}: {value}}}"
    judge(tally, "plan", ["plan", str(demo_config(tmp_path)), "--set", f"{top}={value}",
                          "--out", str(tmp_path / "runs.parquet")], [tmp_path], says=(key, "not a finite number"))


def test_a_non_finite_number_anywhere_in_the_config_is_refused(tmp_path: Path, tally: Any) -> None:
    """Not only the schema's numeric keys: a policy's parameters too, and a number in a list."""
    config = demo_config(tmp_path)
    cfg = yaml.safe_load(config.read_text())
    cfg["configurations"]["policies"] = [{"policy": "random", "amount": math.nan}]
    config.write_text(yaml.safe_dump(cfg))
    judge(tally, "plan", ["plan", str(config), "--out", str(tmp_path / "r.parquet")], [tmp_path],
          says=("configurations.policies[0].amount", "not a finite number"))


def test_a_section_checked_alone_refuses_a_non_finite_number() -> None:
    """What a settings class checks when handed a section (a test's, a command line's)."""
    from forgetting.foundation.config_schema import section
    from forgetting.foundation.errors import ConfigError

    with pytest.raises(ConfigError, match=r"execution\.proxy\.jitter: \.nan is not a finite number"):
        section("execution.proxy", {"jitter": math.nan})


JSON_SPELT = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}  # what Python's json reads
OPTIONS = {  # a numeric option of a command: a non-finite value is argparse's one error line
    "label --threshold": lambda w, v: ["label", str(w.mini_run), "--threshold", v],
    "cost --prompt-tolerance": lambda w, v: ["cost", str(w.mini_run), "--prompt-tolerance", v],
    "scripted-model --settings": lambda w, v: ["scripted-model", "--settings", f'{{"detour_rate": {JSON_SPELT[v]}}}'],
}


@pytest.mark.parametrize("spelling", sorted(NON_FINITE))
@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_a_non_finite_number_given_to_a_numeric_option(
    option: str, spelling: str, world: Any, tmp_path: Path, tally: Any
) -> None:
    argv = OPTIONS[option](world, spelling)
    judge(tally, argv[0], argv, [tmp_path, world.study], says=(option.split()[1],))
