"""Configuration naming in one module (forgetting.deletion.names): name → configuration, configuration
→ name, name → label; the policies keep only their own grammar."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from forgetting.deletion import names as naming
from forgetting.deletion.policy import PolicyContext
from forgetting.foundation.errors import ConfigError
from forgetting.grid import PAPER_CONFIGURATIONS

#: what the policies read of a study that gives no agent or pricing section (the schema's)
POLICY_DEFAULTS = PolicyContext.from_parts()

SRC = Path(__file__).resolve().parent.parent / "src" / "forgetting"
#: what only forgetting.deletion.names defines (at module level: policies define their own grammar as methods)
NAMING = ("parse_configuration_name", "policy_from_name", "name_entry", "name_schemes", "canonical_name",
          "policy_label", "configuration_label", "is_paper_like", "check_given_name")


def test_naming_functions_are_defined_in_one_module():
    where: dict[str, list[str]] = {}
    for path in SRC.rglob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and node.name in NAMING:
                where.setdefault(node.name, []).append(str(path.relative_to(SRC)))
    assert where == {name: ["deletion/names.py"] for name in NAMING}


@pytest.mark.parametrize("name", [d.name for d in PAPER_CONFIGURATIONS[::5]] + [
    "keep8-turn-tool_output-100", "batch4-delayed-turn-tool_output-100", "gate10-delayed-turn-tool_output-100",
    "reuse4-delayed", "mask10",
])
def test_a_name_reads_back_to_its_configuration_and_is_written_again(name):
    d = naming.parse_configuration_name(name, "k", context=POLICY_DEFAULTS)
    assert d.name == name and naming.canonical_name(d) == name


def test_one_label_for_every_kind_of_name():
    paper = naming.parse_configuration_name("immediate-token-both-75", "k", context=POLICY_DEFAULTS)
    assert naming.policy_label(paper.name, paper.as_dict()) == "immediate"
    assert naming.configuration_label(paper.name, paper.as_dict()) == "both · token · 75 %"
    batch = naming.parse_configuration_name("batch4-delayed-turn-tool_output-100", "k", context=POLICY_DEFAULTS)
    assert naming.policy_label(batch.name, batch.as_dict()) == "batched ×4 · delayed"
    keep = naming.parse_configuration_name("keep8-turn-tool_output-100", "k", context=POLICY_DEFAULTS)
    assert not naming.is_paper_like(keep.as_dict()) and naming.policy_label(keep.name, keep.as_dict()) == "keep 8"
    mask = {"policy": "mask", "keep_last": 6}
    assert naming.policy_label("observation-masking", mask) == "observation-masking"  # a free label: itself
    assert naming.policy_label("baseline", {}) == "baseline"


def test_a_bad_name_is_one_line_naming_the_key():
    with pytest.raises(ConfigError, match=r"^configurations\.names\[0\]: 'delayed-turn-both-60' is not in the paper's"):
        naming.parse_configuration_name("delayed-turn-both-60", "configurations.names[0]", context=POLICY_DEFAULTS)
