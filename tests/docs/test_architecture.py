"""docs/ARCHITECTURE.md names only what exists: every ``forgetting.…`` name imports, every
backticked repository path and linked page is there, every dotted config key is in the schema,
and its package map lists the layers of pyproject.toml's ``layers`` contract, in their order."""

from __future__ import annotations

import importlib
import importlib.util
import re
import tomllib
from types import ModuleType

import pytest

from forgetting.foundation.config_schema import load_schema, schema_at
from forgetting_testkit.checkout import ROOT

DOC = ROOT / "docs" / "ARCHITECTURE.md"

_SPAN = re.compile(r"`([^`\n]+)`")
_DOTTED = re.compile(r"\b(forgetting(?:_testkit)?(?:\.\w+)+)")
_CONFIG_KEY = re.compile(r"^([a-z_]+(?:\.[a-z_]+)+)(?::.*)?$")
_LINK = re.compile(r"\]\(([^)#\s]+)\)")


def _text() -> str:
    return DOC.read_text(encoding="utf-8")


def _section(text: str, heading: str) -> str:
    start = text.index(f"## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _spans(text: str) -> list[str]:
    """Backticked spans outside fenced blocks."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return _SPAN.findall(prose)


def resolve(dotted: str) -> object:
    """The module or attribute a dotted name stands for: the longest importable prefix, then
    attributes; LookupError naming what is missing."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError as exc:
            if exc.name is None or not ".".join(parts[:cut]).startswith(exc.name):
                raise  # the module exists but one of its own imports does not
            continue
        for i, attr in enumerate(parts[cut:], start=cut):
            if not hasattr(found, attr):
                # a submodule not imported by its package is still a name the doc may use
                if isinstance(found, ModuleType):
                    try:
                        found = importlib.import_module(".".join(parts[: i + 1]))
                        continue
                    except ModuleNotFoundError:
                        pass
                raise LookupError(f"{dotted}: {'.'.join(parts[:i])} has no {attr!r}")
            found = getattr(found, attr)
        return found
    raise LookupError(f"{dotted}: no such module")


def _dotted_names(text: str) -> list[str]:
    names = {m for span in _spans(text) for m in _DOTTED.findall(span)}
    return sorted(names)


def test_the_architecture_page_names_modules():
    # the check has something to check: the protocols and stages are named by their modules
    names = _dotted_names(_text())
    assert len(names) >= 60
    for protocol in ("forgetting.deletion.policy.Policy", "forgetting.run.model_server.ServerBackend",
                     "forgetting.evaluate.backends.Backend", "forgetting.records.read_trajectory"):
        assert protocol in names


@pytest.mark.parametrize("name", _dotted_names(DOC.read_text(encoding="utf-8")))
def test_every_named_module_and_class_exists(name):
    resolve(name)


def test_a_name_that_does_not_exist_is_caught():
    with pytest.raises(LookupError, match="no 'NO_SUCH_POLICY'"):
        resolve("forgetting.deletion.registry.NO_SUCH_POLICY")
    with pytest.raises(LookupError, match="no such module"):
        resolve("forgetting_nope.module")


def test_every_repository_path_and_linked_page_exists():
    text = _text()
    paths = [s for s in _spans(text) if "/" in s and " " not in s and not s.startswith("results/")]
    assert paths, "the page names no repository path"
    missing = [p for p in paths if not (ROOT / p.rstrip("/")).exists()]
    links = _LINK.findall(text)
    missing += [link for link in links if not (DOC.parent / link).exists()]
    assert not missing, f"docs/ARCHITECTURE.md names paths that do not exist: {missing}"


def test_every_dotted_config_key_is_in_the_schema():
    top = set(load_schema()["properties"])
    keys = [m.group(1) for s in _spans(_text()) if (m := _CONFIG_KEY.match(s)) and m.group(1).split(".")[0] in top]
    assert "model.backend" in keys and "evaluation.backend" in keys
    for key in keys:
        schema_at(key)  # KeyError naming the key when the schema lacks it


def test_the_package_map_lists_the_layers_in_the_contracts_order():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in contracts if c["id"] == "layers"]
    wanted = [[name.strip() for name in layer.split("|")] for layer in layers]
    rows = [line for line in _section(_text(), "The package map").splitlines() if line.startswith("| `")]
    listed = [_SPAN.findall(row.split("|")[1]) for row in rows]
    assert listed == wanted
    for layer in wanted:
        for name in layer:  # found, not imported: importing __main__ would run the command line
            assert importlib.util.find_spec(f"forgetting.{name}") is not None, name


def test_the_data_flow_names_the_workflow_rules():
    (diagram,) = re.findall(r"^```text\n(.*?)^```", _section(_text(), "The data flow"), flags=re.M | re.S)
    stages = [line.split()[0] for line in diagram.splitlines() if line and not line[0].isspace()]
    rules = {name for f in (ROOT / "workflow" / "rules").glob("*.smk")
             for name in re.findall(r"^rule (\w+):", f.read_text(encoding="utf-8"), re.M)}
    assert len(stages) >= 6 and stages[0] == "plan"
    assert not set(stages) - rules, f"the diagram names rules the workflow lacks: {set(stages) - rules}"


def test_readme_and_developing_link_the_page():
    assert "docs/ARCHITECTURE.md" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert "ARCHITECTURE.md" in (ROOT / "docs" / "DEVELOPING.md").read_text(encoding="utf-8")
