"""The study's smaller typed sections — the plan's, the model's, the analysis', the price sheets',
the cluster's — each built once from the checked config when the study is loaded
(:func:`forgetting.study.config.study_from_mapping`) and read from the study as it is
(``study.model.backend``, ``study.pricing.primary``); the larger ones have modules of their own
(:mod:`forgetting.study.runner`, :mod:`~forgetting.study.proxy`, :mod:`~forgetting.study.evaluation`,
:mod:`~forgetting.study.statistics`, :mod:`~forgetting.study.endpoint`)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

from forgetting.cost.pricing import PricingProfile, profile_names, profiles_from_config
from forgetting.foundation import config_schema
from forgetting.foundation.errors import ConfigError
from forgetting.study.endpoint import EndpointSettings


def frozen(value: Any) -> Any:
    """``value`` read-only: its mappings as read-only views, its lists as tuples (deeply)."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: frozen(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(frozen(v) for v in value)
    return value


def thawed(value: Any) -> Any:
    """A plain copy of a :func:`frozen` value (dicts and lists), for code that writes its own."""
    if isinstance(value, Mapping):
        return {k: thawed(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thawed(v) for v in value]
    return value


def expand_path(value: str, key: str) -> str:
    """A path from the config with ``~`` and ``$VARS`` expanded (relative ones stay relative); a
    variable that is not set is one line naming ``key``."""
    out = os.path.expandvars(os.path.expanduser(str(value)))
    unset = re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", out)
    if unset:
        raise ConfigError(f"{key}: {value!r} names ${unset[0]}, which is not set in the environment")
    return out


@dataclass(frozen=True)
class PlanSettings:
    """What the plan and the workflow read: ``study.results_dir``, ``study.synthetic``, and the
    batches' size, concurrency and time limits (``execution.*``)."""

    results_dir: str
    synthetic: bool
    batch_size: int
    concurrency: int
    #: ``execution.batch_runtime_min`` (None: derived from the worst case)
    batch_runtime_min: int | None
    batch_runtime_limit_min: int
    #: ``execution.scratch_dir`` as given (None: the system's temporary directory)
    scratch_dir: str | None

    @classmethod
    def from_filled(cls, cfg: Mapping[str, Any]) -> PlanSettings:
        execution, study = cfg["execution"], cfg["study"]
        runtime = execution.get("batch_runtime_min")  # optional: derived
        scratch = execution.get("scratch_dir")  # optional: the system's
        return cls(
            results_dir=str(study["results_dir"]), synthetic=bool(study["synthetic"]),
            batch_size=int(execution["batch_size"]), concurrency=int(execution["concurrency"]),
            batch_runtime_min=int(runtime) if runtime else None,
            batch_runtime_limit_min=int(execution["batch_runtime_limit_min"]),
            scratch_dir=str(scratch) if scratch else None,
        )


@dataclass(frozen=True)
class ModelSettings:
    """The ``model`` section: what the plan, the images and the memory budget read as fields;
    ``section``, the whole section read-only, is what a model-server backend starts from."""

    backend: str
    context_window: int
    #: ``model.vllm`` (read-only): the server's options
    vllm: Mapping[str, Any]
    #: ``model.endpoint`` resolved (``model.backend: endpoint`` only)
    endpoint: EndpointSettings | None
    #: ``model.endpoint.runs_in_flight`` (None: a batch's ``execution.concurrency``)
    endpoint_runs_in_flight: int | None
    section: Mapping[str, Any]

    @classmethod
    def from_filled(cls, model: Mapping[str, Any], *, root: Path) -> ModelSettings:
        is_endpoint = model["backend"] == "endpoint"
        endpoint = EndpointSettings.from_filled(model["endpoint"], root=root) if is_endpoint else None
        cap = model["endpoint"].get("runs_in_flight")  # optional: the batch's concurrency
        return cls(backend=str(model["backend"]), context_window=int(model["context_window"]),
                   vllm=frozen(model["vllm"]), endpoint=endpoint,
                   endpoint_runs_in_flight=int(cap) if cap is not None else None, section=frozen(model))

    @property
    def max_model_len(self) -> int:
        """``model.vllm.max_model_len``, else ``model.context_window``."""
        return int(self.vllm.get("max_model_len") or self.context_window)

    @property
    def tensor_parallel_size(self) -> int:
        return int(self.vllm.get("tensor_parallel_size") or 1)

    @property
    def server_image(self) -> str | None:
        """``model.vllm.apptainer_image`` (None: vLLM on the host)."""
        image = self.vllm.get("apptainer_image")  # optional: vllm on the host
        return str(image) if image else None

    def as_dict(self) -> dict[str, Any]:
        """The section as a plain mapping, for a server to start from (a copy: the caller's to change)."""
        return thawed(self.section)


@dataclass(frozen=True)
class AgentSettings:
    """``agent``: the turn cap the analysis and the plan read, and each agent's image."""

    turn_cap: int
    #: ``agent.<agent>.apptainer_image`` by agent (None: none named)
    images: Mapping[str, str | None]

    @classmethod
    def from_filled(cls, agent: Mapping[str, Any]) -> AgentSettings:
        images = {name: (str(v["apptainer_image"]) if isinstance(v, Mapping) and v.get("apptainer_image") else None)
                  for name, v in agent.items() if isinstance(v, Mapping)}
        return cls(turn_cap=int(agent["turn_cap"]), images=MappingProxyType(images))


@dataclass(frozen=True)
class AnalysisSettings:
    """``analysis``: the behaviour labels' threshold, window and rules, and the turn cap."""

    refetch_threshold: float
    looping_window: int
    turn_cap: int
    #: ``analysis.label_rules`` resolved (None: the packaged table)
    label_rules: Path | None

    @classmethod
    def from_filled(cls, cfg: Mapping[str, Any], *, root: Path) -> AnalysisSettings:
        analysis = cfg["analysis"]
        rules = analysis.get("label_rules")  # optional: the packaged table
        return cls(refetch_threshold=float(analysis["refetch_threshold"]),
                   looping_window=int(analysis["looping_window"]), turn_cap=int(cfg["agent"]["turn_cap"]),
                   label_rules=(Path(rules) if Path(rules).is_absolute() else root / rules) if rules else None)

    def label_options(self) -> dict[str, Any]:
        """Keyword arguments of :func:`forgetting.behaviour.label_run`."""
        return {"threshold": self.refetch_threshold, "looping_window": self.looping_window,
                "turn_cap": self.turn_cap, "rules": self.label_rules}


@dataclass(frozen=True)
class PricingSettings(config_schema.Section):
    """``pricing``: the price sheets, loaded once (the primary profile first), and the prompt
    check's tolerance."""

    primary: str
    #: the profiles' names as configured, in the cost stage's order (the primary first where
    #: ``pricing.profiles`` leaves it out)
    names: tuple[str, ...]
    #: every computed profile, the primary first where ``pricing.profiles`` leaves it out
    profiles: tuple[PricingProfile, ...]
    prompt_tolerance: float
    PATH: ClassVar[str] = "pricing"

    @classmethod
    def from_filled(cls, values: Mapping[str, Any], *, root: Path = config_schema.PROJECT_ROOT) -> PricingSettings:
        profiles, primary = profiles_from_config(values, root)
        return cls(primary=primary, names=tuple(profile_names(values)), profiles=tuple(profiles),
                   prompt_tolerance=float(values["prompt_tolerance"]))

    @property
    def primary_profile(self) -> PricingProfile:
        return next(p for p in self.profiles if p.name == self.primary)


@dataclass(frozen=True)
class ContainerSettings(config_schema.Section):
    """The ``containers`` section, resolved (every default the schema's)."""

    #: ``containers.image_dir`` as given (:attr:`image_dir`: expanded where it is used)
    image_dir_value: str
    executable: str
    build_args: tuple[str, ...]
    build_timeout_s: int
    pull_chunk_size: int
    on_login_node: bool
    PATH: ClassVar[str] = "containers"

    @classmethod
    def from_filled(cls, values: Mapping[str, Any], **context: Any) -> ContainerSettings:
        s = values
        return cls(
            image_dir_value=str(s["image_dir"]), executable=str(s["executable"]),
            build_args=tuple(s["build_args"]), build_timeout_s=int(s["build_timeout_s"]),
            pull_chunk_size=int(s["pull_chunk_size"]), on_login_node=bool(s["on_login_node"]),
        )

    @property
    def image_dir(self) -> str:
        """``containers.image_dir``, ``~`` and ``$VARS`` expanded (an unset variable: one line)."""
        return expand_path(self.image_dir_value, "containers.image_dir")


@dataclass(frozen=True)
class ClusterSettings:
    """``cluster.route``, ``cluster.preflight_first_step`` and the ``containers`` section."""

    #: ``A``, ``B`` or ``C`` of docs/cluster.md (None: not stated)
    route: str | None
    containers: ContainerSettings
    #: the agents' preflight job also runs each agent's first step (forgetting.cluster.preflight.first_step)
    preflight_first_step: bool

    @classmethod
    def from_filled(cls, cfg: Mapping[str, Any]) -> ClusterSettings:
        route = cfg["cluster"].get("route")  # optional: no route stated
        return cls(route=str(route) if route else None, containers=ContainerSettings.from_filled(cfg["containers"]),
                   preflight_first_step=bool(cfg["cluster"]["preflight_first_step"]))
