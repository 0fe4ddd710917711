"""Loading and checking a study config (``config/*.yaml``).

The JSON schema in ``workflow/schemas/config.schema.yaml`` is the single description of the
keys and their defaults (:mod:`forgetting.foundation.config_schema`); the Snakefile validates the same
file with ``snakemake.utils.validate``. On top of the schema this module checks what a schema
cannot (names in the grid, files that must exist, duplicate or unknown task ids) and turns
every problem into one line naming the key. A :class:`Study` is the one typed, immutable
record of a loaded config: a typed section per stage (``study.plan``, ``study.deletion``,
``study.proxy``, ``study.runner``, ``study.model``, ``study.evaluation``, ``study.analysis``,
``study.pricing``, ``study.statistics``, ``study.endpoint``, ``study.cluster``), each built and
checked here, once; the stages read them as they are and never the raw config.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forgetting.behaviour.rules import load_rules
from forgetting.deletion.names import parse_configuration_name
from forgetting.deletion.policy import PolicyContext
from forgetting.deletion.settings import DeletionSettings
from forgetting.foundation import inputs
from forgetting.foundation.config_schema import PROJECT_ROOT as PROJECT_ROOT  # where configs, schema and resources live
from forgetting.foundation.config_schema import error_line, fill_defaults, first_error, load_schema
from forgetting.foundation.errors import ConfigError, UserError
from forgetting.grid import BASELINE, PAPER_CONFIGURATIONS, Deletion, filter_configurations, paper_configuration
from forgetting.instances.dataset_file import DatasetSettings
from forgetting.instances.images import check_template
from forgetting.instances.tasks import load_task_ids
from forgetting.study.endpoint import EndpointSettings
from forgetting.study.evaluation import EvalSettings
from forgetting.study.policies import build_policies
from forgetting.study.proxy import ProxySettings
from forgetting.study.runner import RunnerSettings
from forgetting.study.sections import (
    AgentSettings,
    AnalysisSettings,
    ClusterSettings,
    ModelSettings,
    PlanSettings,
    PricingSettings,
    frozen,
    thawed,
)
from forgetting.study.statistics import StatsSettings

#: the most runs a study may plan (the paper's: 9,400): its run table is built in memory
MAX_RUNS = 1_000_000
#: the keys whose values are paths (files or directories the study reads or writes)
PATH_KEYS: tuple[str, ...] = (
    "study.results_dir", "tasks.ids_file", "dataset.instances", "model.vllm.apptainer_image",
    "model.vllm.model_dir", "model.endpoint.address_file", "agent.mini.config_file", "agent.mini.apptainer_image",
    "agent.mini-text.config_file", "agent.mini-text.apptainer_image", "agent.trae.apptainer_image",
    "agent.trae.install_dir", "execution.scratch_dir", "evaluation.image_dir", "containers.image_dir",
    "analysis.label_rules", "pricing.dir",
)


def validate_schema(config: Mapping[str, Any], source: str = "config") -> dict[str, Any]:
    """Validate against the JSON schema; return a copy with defaults filled in (parts of a
    loaded study's read-only ``raw`` taken as plain data)."""
    config = thawed(config)
    error = first_error(config)
    if error is not None:
        raise ConfigError(f"{source}: {error_line(error)}")
    return fill_defaults(copy.deepcopy(dict(config)), load_schema())


@dataclass(frozen=True)
class Study:
    """A checked study config: what to run and how to analyse it, a typed section per stage."""

    source: str
    root: Path
    #: the whole config as loaded, every default filled (read-only): what the config's own
    #: tools read (:meth:`config_paths`, the reference); the stages read the typed sections
    raw: Mapping[str, Any]
    name: str
    seed: int
    agents: tuple[str, ...]
    tasks: tuple[str, ...]
    configurations: tuple[Deletion, ...]
    baseline_repeats: int
    deletion_repeats: int
    results_dir: Path
    plan: PlanSettings
    dataset: DatasetSettings
    agent: AgentSettings
    deletion: DeletionSettings
    #: what a policy's ``configure`` reads of the rest of the config (the turn cap, the prices)
    policy_context: PolicyContext
    proxy: ProxySettings
    runner: RunnerSettings
    model: ModelSettings
    evaluation: EvalSettings
    analysis: AnalysisSettings
    pricing: PricingSettings
    statistics: StatsSettings
    cluster: ClusterSettings
    extra: Mapping[str, Any] = field(default_factory=dict)

    def as_config(self) -> dict[str, Any]:
        """The config as plain, writable data (a copy): to derive another study from, or to write out."""
        return thawed(self.raw)

    @property
    def endpoint(self) -> EndpointSettings | None:
        """``model.endpoint`` resolved (``model.backend: endpoint`` only)."""
        return self.model.endpoint

    def path(self, value: str | os.PathLike[str]) -> Path:
        """Resolve a path from the config against the project root."""
        p = Path(value)
        return p if p.is_absolute() else self.root / p

    def config_paths(self) -> list[Path]:
        """Every path the config names (:data:`PATH_KEYS`; ``~`` and ``$VARS`` expanded),
        resolved against the project root: an OSError there is the user's to fix."""
        out = []
        for key in PATH_KEYS:
            node: Any = self.raw
            for part in key.split("."):
                node = node.get(part) if isinstance(node, Mapping) else None
            if isinstance(node, str) and node:
                out.append(self.path(os.path.expandvars(os.path.expanduser(node))))
        return out

    @property
    def deletion_configurations(self) -> tuple[Deletion, ...]:
        return tuple(d for d in self.configurations if not d.is_baseline)

    def configuration(self, name: str) -> Deletion:
        for d in self.configurations:
            if d.name == name:
                return d
        raise KeyError(name)


def _as_list(value: Any) -> list[str] | None:
    if value is None:
        return None
    return [value] if isinstance(value, str) else list(value)


def _only(items: list[str], cfg: Mapping[str, Any], key: str, source: str, what: str) -> list[str]:
    """``items`` narrowed to the config's ``key`` (``only_agents``, ``only_tasks``): each name
    it lists must be one of them, else a ConfigError saying it is not ``what``."""
    only = _as_list(cfg.get(key))
    if not only:
        return items
    for name in only:
        if name not in items:
            raise ConfigError(f"{source}: {key}: {name!r} is not {what}")
    return [x for x in items if x in only]


def _select_configurations(cfg: Mapping[str, Any], context: PolicyContext) -> list[Deletion]:
    section = cfg["configurations"]
    names = section["names"]
    if names == "all":
        chosen = list(PAPER_CONFIGURATIONS)
    elif names == "none":
        chosen = []
    else:
        chosen = []
        for i, name in enumerate(names):
            if name == BASELINE:
                continue  # the baseline is always part of a study
            chosen.append(parse_configuration_name(name, f"configurations.names[{i}]", context))
    filt = section.get("filter")
    if filt:
        amounts = filt.get("amount")
        if filt.get("granularity") == ["token"] and amounts and all(float(a) == 100 for a in amounts):
            raise ConfigError(
                "configurations.filter: token granularity at 100 % equals turn-level 100 % and is not run"
            )
        chosen = filter_configurations(
            chosen,
            scope=filt.get("scope"),
            granularity=filt.get("granularity"),
            amount=amounts,
            timing=filt.get("timing"),
        )
    if section.get("policies"):
        chosen.extend(build_policies(section["policies"], key="configurations.policies", context=context))
    seen: set[str] = set()
    for d in chosen:
        if d.name in seen:
            raise ConfigError(f"configurations: {d.name!r} is listed twice")
        seen.add(d.name)
    return chosen


def find_root(config_path: Path) -> Path:
    """The project root a config's relative paths are resolved against."""
    for parent in [config_path.resolve().parent, *config_path.resolve().parents]:
        if (parent / "Snakefile").exists() or (parent / "pyproject.toml").exists():
            return parent
    return Path.cwd()


def read_yaml(path: str | os.PathLike[str]) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file() and not p.is_dir():
        raise ConfigError(f"{p}: config file not found")
    data = inputs.read_yaml(p, what="config file", error=ConfigError)
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: a config must be a mapping of keys to values")
    return data


def merge_configs(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """``overlay`` on ``base``, mappings merged key by key (as Snakemake merges several
    ``--configfile``), every other value replaced."""
    out = dict(base)
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_configs(out[key], value)
        else:
            out[key] = value
    return out


def load_study(
    path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    overrides: Mapping[str, Any] | None = None,
) -> Study:
    """Read, validate and resolve a config file — or several, each an overlay on the ones
    before it (``config/config.yaml config/policies.yaml``) — and ``overrides`` as from
    ``--config`` (top-level keys replaced)."""
    paths = [Path(path)] if isinstance(path, str | os.PathLike) else [Path(p) for p in path]
    data: dict[str, Any] = {}
    for p in paths:
        data = merge_configs(data, read_yaml(p))
    if overrides:
        data = {**data, **overrides}
    source = " + ".join(str(p) for p in paths)
    return study_from_mapping(data, source=source, root=find_root(paths[0]))


def study_from_mapping(data: Mapping[str, Any], *, source: str, root: Path) -> Study:
    """Build a :class:`Study` from an already-parsed config (the Snakefile's ``config``)."""
    cfg = validate_schema(data, source)
    try:
        check_template(cfg["evaluation"]["instance_images"]["name_template"])
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    root = Path(root)
    context = PolicyContext.from_filled(cfg, root)
    configurations = _select_configurations(cfg, context)
    only = _as_list(cfg.get("only"))
    if only:
        known = {d.name for d in configurations} | {BASELINE}
        for name in only:
            if name not in known:
                raise ConfigError(
                    f"{source}: only: {name!r} is not a configuration of this study; "
                    f"choose from: baseline, {', '.join(sorted(known - {BASELINE}))}"
                )
        configurations = [d for d in configurations if d.name in only]
    include_baseline = not only or BASELINE in only
    if include_baseline:
        configurations = [paper_configuration(BASELINE), *configurations]
    if not configurations:
        raise ConfigError(f"{source}: configurations: the selection is empty")

    agents = list(cfg["agents"])
    agents = _only(agents, cfg, "only_agents", source, f"an agent of this study ({', '.join(agents)})")
    tasks = _only(load_task_ids(cfg, root=root, source=source), cfg, "only_tasks", source, "a task of this study")

    analysis = AnalysisSettings.from_filled(cfg, root=root)
    if analysis.label_rules is not None:  # a bad table stops the study now, not at its analysis stage
        try:
            load_rules(analysis.label_rules)
        except UserError as exc:
            raise ConfigError(f"{source}: analysis.label_rules: {exc}") from None

    # the price sheets too: a bad price stops the study before any job, not at its analysis
    try:
        pricing = PricingSettings.from_filled(cfg["pricing"], root=root)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    except UserError as exc:
        raise ConfigError(f"{source}: pricing: {exc}") from None

    try:  # every other section typed once (where an endpoint is: stops the study now, not in its batches)
        model = ModelSettings.from_filled(cfg["model"], root=root)
        scratch = cfg["execution"].get("scratch_dir")  # optional: the system's temporary directory
        evaluation = EvalSettings.from_filled(cfg["evaluation"], root=root, scratch=scratch)
        deletion = DeletionSettings.from_filled(cfg["deletion"])
        sections = {
            "plan": PlanSettings.from_filled(cfg), "dataset": DatasetSettings.from_filled(cfg["dataset"], root=root),
            "agent": AgentSettings.from_filled(cfg["agent"]), "deletion": deletion, "policy_context": context,
            "proxy": ProxySettings.from_filled(cfg["execution"]["proxy"], deletion=deletion),
            "runner": RunnerSettings.from_filled(cfg, root=root, evaluation=evaluation), "model": model,
            "evaluation": evaluation, "analysis": analysis, "pricing": pricing,
            "statistics": StatsSettings.from_filled(cfg["statistics"], on_error=cfg["evaluation"]["on_error"]),
            "cluster": ClusterSettings.from_filled(cfg),
        }
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None

    repeats = cfg["repeats"]
    planned = len(agents) * len(tasks) * sum(
        int(repeats["baseline"] if d.is_baseline else repeats["deletion"]) for d in configurations
    )
    if planned > MAX_RUNS:
        raise ConfigError(
            f"{source}: the study plans {planned:,} runs ({len(agents)} agents × {len(tasks)} tasks × "
            f"{len(configurations)} configurations and their repeats); at most {MAX_RUNS:,}"
        )
    study_section = cfg["study"]
    return Study(
        source=source,
        root=root,
        raw=frozen(cfg),
        name=study_section["name"],
        seed=int(study_section["seed"]),
        agents=tuple(agents),
        tasks=tuple(tasks),
        configurations=tuple(configurations),
        baseline_repeats=int(repeats["baseline"]),
        deletion_repeats=int(repeats["deletion"]),
        results_dir=(root / study_section["results_dir"]),
        **sections,
    )
