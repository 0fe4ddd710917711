"""The deletion policies by name: a plain mapping of each name to its class's dotted path.

A class is imported the first time its name is used, so this module imports none of the
policy modules (they import :mod:`forgetting.deletion.policy`, never this registry).
Adding a policy: write its module (see :mod:`forgetting.deletion.policy`) and add one line
here; its ``name`` must be the key.
"""

from __future__ import annotations

import functools
import importlib

from forgetting.deletion.policy import Policy, PolicyError
from forgetting.deletion.settings import DeletionSettings
from forgetting.foundation.errors import ConfigError
from forgetting.grid import Deletion

#: policy name → ``module:Class``
POLICIES: dict[str, str] = {
    "none": "forgetting.deletion.policy:NoDeletion",
    "random": "forgetting.deletion.random_policy:RandomDeletion",
    "batch": "forgetting.deletion.batch_policy:BatchedDeletion",
    "gate": "forgetting.deletion.gate_policy:CacheAwareGate",
    "reuse": "forgetting.deletion.reuse_policy:ReuseAware",
    "mask": "forgetting.deletion.mask_policy:ObservationMasking",
}


@functools.cache
def policy_class(name: str) -> type[Policy]:
    """The class of the policy ``name`` (a key of :data:`POLICIES`), imported on first use."""
    module, _, attr = POLICIES[name].partition(":")
    cls: type[Policy] = getattr(importlib.import_module(module), attr)
    if cls.name != name:
        raise PolicyError(f"{POLICIES[name]} is named {cls.name!r}, registered as {name!r}")
    return cls


def policies() -> dict[str, type[Policy]]:
    """Every policy by name (``none``, ``random``, …)."""
    return {name: policy_class(name) for name in POLICIES}


def configurable_policies() -> list[str]:
    """Names a ``configurations.policies`` entry may use."""
    return sorted(n for n, cls in policies().items() if cls.configurable)


def make_policy(deletion: Deletion, settings: DeletionSettings) -> Policy:
    if deletion.policy not in POLICIES:
        raise ConfigError(
            f"configuration {deletion.name!r}: unknown policy {deletion.policy!r}; "
            f"known policies: {', '.join(sorted(POLICIES))}"
        )
    return policy_class(deletion.policy)(deletion, settings)
