"""Every default is stated once, in the config schema, and every settings class reads it there.

The strong check: a copy of the schema with every default changed is put in place of the real
one, and each settings class built without a config must come out with the changed values —
so no class can hold a default of its own. The structural checks: every key has a
description, and the modules that read config sections hold no literal default for a schema key.
"""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from forgetting.foundation import config_schema
from forgetting.foundation.config_schema import load_schema, schema_at
from forgetting_testkit.runner import filled_model

SRC = Path(__file__).resolve().parent.parent / "src" / "forgetting"


def _keys(schema: Mapping[str, Any], path: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    for key, sub in (schema.get("properties") or {}).items():
        yield f"{path}{key}", sub
        yield from _keys(sub, f"{path}{key}.")
    if isinstance(schema.get("items"), Mapping):
        yield from _keys(schema["items"], f"{path}[].")


def test_every_key_has_a_description():
    missing = [key for key, sub in _keys(load_schema()) if not str(sub.get("description") or "").strip()]
    assert missing == []


def test_every_count_and_number_has_a_maximum():
    """A count without a bound (``repeats: 1000000000``) would allocate without bound."""
    numeric = [(key, sub) for key, sub in _keys(load_schema()) if sub.get("type") in ("integer", "number")]
    unbounded = [key for key, sub in numeric if "maximum" not in sub and "exclusiveMaximum" not in sub]
    assert numeric and unbounded == []


def test_a_study_planning_more_runs_than_the_limit_is_refused_before_its_plan(tmp_path):
    from forgetting.foundation.errors import ConfigError
    from forgetting.study.config import MAX_RUNS, load_study

    root = SRC.parent.parent
    with pytest.raises(ConfigError, match=f"at most {MAX_RUNS:,}"):
        load_study(root / "config/config.yaml", {"repeats": {"baseline": 1000, "deletion": 1000}})


def test_a_default_is_either_fixed_or_described_not_both():
    both = [key for key, sub in _keys(load_schema()) if "default" in sub and "x-default" in sub]
    assert both == []


# ------------------------------------------------------------------ the schema changed under the code


def _changed(value: Any, spec: Mapping[str, Any]) -> Any:
    """Another valid value for a key than its default."""
    if isinstance(value, bool):
        return not value
    if "enum" in spec:  # (an enum of one value stays as it is: model.tokenizer)
        return next((v for v in spec["enum"] if v != value), value)
    if isinstance(value, int) and spec.get("type") == "integer":
        return value + 1
    if isinstance(value, int | float):
        high = spec.get("maximum", spec.get("exclusiveMaximum"))
        return value / 2 if high is not None and value + 0.5 >= high else value + 0.5
    if isinstance(value, str):
        return value + "-changed"
    if isinstance(value, list):
        return [*value, "--changed"]
    return value  # an object: its keys are changed one by one


def _change_defaults(schema: dict[str, Any]) -> None:
    for sub in (schema.get("properties") or {}).values():
        if "default" in sub:
            sub["default"] = _changed(sub["default"], sub)
        _change_defaults(sub)
    for rule in schema.get("allOf") or ():
        _change_defaults(rule.get("then") or {})


@pytest.fixture
def changed_schema(tmp_path, monkeypatch) -> Callable[[str], Any]:
    """The schema with every default changed, in place of the real one; returns a lookup of
    the changed default of a dotted key."""
    schema = copy.deepcopy(load_schema())
    _change_defaults(schema)
    path = tmp_path / "config.schema.yaml"
    path.write_text(yaml.safe_dump(schema))
    monkeypatch.setattr(config_schema, "SCHEMA_PATH", path)
    config_schema.load_schema.cache_clear()
    config_schema._validator.cache_clear()
    yield lambda key: schema_at(key)["default"]
    config_schema.load_schema.cache_clear()
    config_schema._validator.cache_clear()


def _scalar_defaults(section: str) -> dict[str, Any]:
    return {key: sub["default"] for key, sub in schema_at(section)["properties"].items()
            if "default" in sub and not isinstance(sub["default"], dict)}


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _sections() -> dict[str, Callable[[], Any]]:
    """Settings classes whose fields are the keys of one section, built without a config."""
    from forgetting.cluster.containers import ContainerSettings
    from forgetting.deletion.settings import DeletionSettings
    from forgetting.demo.scripted.settings import ScriptedSettings
    from forgetting.study.evaluation import EvalSettings
    from forgetting.study.proxy import ProxySettings
    from forgetting.study.runner import TraeSettings
    from forgetting.study.statistics import StatsSettings

    return {
        "execution.proxy": ProxySettings.from_parts,
        "deletion": DeletionSettings.from_section,
        "model.scripted": ScriptedSettings.from_mapping,
        "statistics": StatsSettings.from_section,
        "containers": ContainerSettings.from_section,
        "evaluation": EvalSettings.from_section,
        "evaluation.apptainer": lambda: EvalSettings.from_section().apptainer,
        "evaluation.docker": lambda: EvalSettings.from_section().docker,
        "evaluation.local": lambda: EvalSettings.from_section().local,
        "agent.trae": TraeSettings.from_section,
    }


SECTIONS = ("agent.trae", "containers", "deletion", "evaluation", "evaluation.apptainer", "evaluation.docker",
            "evaluation.local", "execution.proxy", "model.scripted", "statistics")


def test_every_settings_section_is_checked():
    assert sorted(_sections()) == list(SECTIONS)


@pytest.mark.parametrize("section", SECTIONS)
def test_settings_take_every_default_from_the_schema(changed_schema, section):
    from forgetting.study.config import PROJECT_ROOT

    settings = _sections()[section]()
    defaults = _scalar_defaults(section)
    assert defaults, section
    for key, default in defaults.items():
        if (section, key) == ("evaluation", "on_error"):
            continue  # only the statistics act on it: StatsSettings.on_error, below
        value = _plain(getattr(settings, key))
        if key == "image_dir" and section == "evaluation":
            default = PROJECT_ROOT / default
        assert value == default, f"{section}.{key}"
    if section == "deletion":
        assert settings.placeholders == {k: changed_schema(f"deletion.placeholders.{k}")
                                         for k in ("reasoning", "tool_output")}
    if section == "statistics":
        assert settings.on_error == changed_schema("evaluation.on_error")


def test_runner_settings_take_their_defaults_from_the_schema(changed_schema):
    from forgetting.study.config import PROJECT_ROOT
    from forgetting.study.runner import RunnerSettings

    s = RunnerSettings.from_parts({"model": {"backend": "scripted", "name": "m"}, "dataset": {"kind": "demo"}})
    d = changed_schema
    assert (s.turn_cap, s.command_timeout_s, s.fixed_test_durations) == (
        d("agent.turn_cap"), d("agent.command_timeout_s"), d("agent.fixed_test_durations"))
    assert (s.run_timeout_s, s.concurrency, s.force_rerun) == (
        d("execution.run_timeout_s"), d("execution.concurrency"), d("force_rerun"))
    assert (s.trae.executable, s.trae.max_retries) == (d("agent.trae.executable"), d("agent.trae.max_retries"))
    assert (s.apptainer, list(s.apptainer_exec_args), s.image_dir) == (
        d("evaluation.apptainer.executable"), d("evaluation.apptainer.exec_args"),
        PROJECT_ROOT / d("evaluation.image_dir"))
    assert (s.model["temperature"], s.model["max_tokens"]) == (d("model.temperature"), d("model.max_tokens"))
    demo_instances = load_schema()["properties"]["dataset"]["allOf"][0]["then"]["properties"]["instances"]["default"]
    assert s.instances == PROJECT_ROOT / demo_instances


def test_the_study_and_the_policies_read_the_schema(changed_schema):
    from forgetting.deletion.policy import PolicyContext
    from forgetting.report.tables.notes import NoteContext
    from forgetting.run.model_server import vllm_command

    context = PolicyContext.from_parts()
    assert (context.turn_cap, context.pricing_primary) == (changed_schema("agent.turn_cap"),
                                                           changed_schema("pricing.primary"))
    notes = NoteContext()
    assert (notes.refetch_threshold, notes.looping_window) == (changed_schema("analysis.refetch_threshold"),
                                                               changed_schema("analysis.looping_window"))
    cmd = vllm_command(filled_model({"backend": "vllm", "name": "m"}), host="h", port=1)
    assert changed_schema("model.vllm.executable") in cmd
    assert ("--gpu-memory-utilization" in cmd) == (changed_schema("model.vllm.device") == "gpu")
    assert ("--enforce-eager" in cmd) == changed_schema("model.vllm.enforce_eager")
    assert cmd[cmd.index("--max-model-len") + 1] == str(changed_schema("model.context_window"))
    assert cmd[-1] == "--changed"  # model.vllm.extra_args


def test_a_loaded_study_is_filled_from_the_schema(changed_schema, tmp_path):
    from forgetting.study.config import study_from_mapping

    root = Path(__file__).resolve().parent.parent
    config = yaml.safe_load((root / "config" / "demo.yaml").read_text())
    config["repeats"] = {}
    config["configurations"]["policies"] = []
    config["pricing"] = {"dir": str(root / "resources" / "pricing"), "primary": "paper", "profiles": ["paper"]}
    study = study_from_mapping(config, source="demo", root=root)
    assert (study.baseline_repeats, study.deletion_repeats) == (changed_schema("repeats.baseline"),
                                                               changed_schema("repeats.deletion"))
    assert study.runner.run_timeout_s == changed_schema("execution.run_timeout_s")
    assert study.statistics.holm_family == changed_schema("statistics.holm_family")


# ------------------------------------------------------------------ no literal default in code

#: modules that read config sections (settings classes and the stages that read a key directly)
READERS = (
    "study/config.py", "study/plan.py", "study/sections.py", "study/runner.py", "study/proxy.py",
    "study/evaluation.py", "study/statistics.py", "study/endpoint.py", "workflow.py", "instances/tasks.py",
    "instances/dataset_file.py", "cluster/containers.py", "run/model_server.py", "deletion/settings.py",
    "deletion/policy.py", "run/batch.py", "run/trae.py", "run/versions.py", "instances/load.py",
    "evaluate/backends.py", "report/stats/run.py", "demo/scripted/settings.py", "cost/pricing.py",
    "report/tables/__init__.py", "report/tables/notes.py", "commands/scripted_model.py", "commands/proxy.py",
    "endpoint/backend.py", "endpoint/serve.py",
)
#: ``.get(key) or …`` readings that are not a second default: what a key's absence means (its
#: schema ``x-default``), or a key of something else than the study config
NOT_A_SECOND_DEFAULT = {
    ("study/runner.py", "served_name"): "model.served_name's x-default: model.name",
    ("study/sections.py", "tensor_parallel_size"): "model.vllm.tensor_parallel_size's x-default: vLLM's own, one GPU",
    ("deletion/policy.py", "name"): "a configurations.policies entry's name, from the policy's own",
}


def _schema_keys() -> set[str]:
    return {key.rsplit(".", 1)[-1] for key, _ in _keys(load_schema())}


def _literal(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant | ast.Tuple | ast.List | ast.Dict | ast.Set) and not (
        isinstance(node, ast.Constant) and node.value is None
    )


def _defaults_in(path: Path, keys: set[str]) -> list[str]:
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    rel = str(path.relative_to(SRC))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any(  # a dataclass field with a literal default
            "dataclass" in ast.unparse(d) for d in node.decorator_list
        ):
            for item in node.body:
                if (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                        and item.target.id in keys and _literal(item.value)):
                    found.append(f"{rel}:{item.lineno} {node.name}.{item.target.id} = …")
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):  # section.get("key") or default
            first = node.values[0]
            if (isinstance(first, ast.Call) and isinstance(first.func, ast.Attribute) and first.func.attr == "get"
                    and first.args and isinstance(first.args[0], ast.Constant) and first.args[0].value in keys
                    and (rel, first.args[0].value) not in NOT_A_SECOND_DEFAULT and len(node.values) > 1
                    and _literal(node.values[1])):
                found.append(f"{rel}:{node.lineno} .get({first.args[0].value!r}) or …")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and len(node.args) == 2 and isinstance(node.args[0], ast.Constant) and node.args[0].value in keys
                and (rel, node.args[0].value) not in NOT_A_SECOND_DEFAULT
                and not (isinstance(node.args[1], ast.Constant) and node.args[1].value is None)):
            found.append(f"{rel}:{node.lineno} .get({node.args[0].value!r}, …)")
    return found


def test_no_module_reading_the_config_states_a_default_of_its_own():
    keys = _schema_keys()
    found = [hit for rel in READERS for hit in _defaults_in(SRC / rel, keys)]
    assert found == []


def test_the_workflow_rules_read_filled_sections():
    rules = Path(__file__).resolve().parent.parent / "workflow" / "rules"
    keys = _schema_keys()
    found = [f"{p.name}: {m.group(0)}" for p in sorted(rules.glob("*.smk"))
             for m in re.finditer(r'\.get\("([A-Za-z_-]+)", [^)]+\)', p.read_text()) if m.group(1) in keys]
    assert found == []
