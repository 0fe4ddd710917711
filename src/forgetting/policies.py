"""Deletion policies defined in a study config (``configurations.policies``).

Each entry names a configuration and a registered policy (:mod:`forgetting.deletion.policy`)
with its parameters; the policy checks them and returns a :class:`~forgetting.grid.Deletion`,
the one type every consumer (planner, proxy, analysis) sees. The paper's own policy,
``random``, is configurable here with other amounts and retention delays than the 42.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from forgetting.errors import ConfigError
from forgetting.grid import Deletion


def build_policies(entries: Iterable[Mapping[str, Any]], key: str) -> list[Deletion]:
    """One :class:`Deletion` per config entry; ConfigError (one line) for a bad entry."""
    from forgetting.deletion.policy import configurable_policies, policies

    registry = policies()
    known = configurable_policies()
    out = []
    for i, entry in enumerate(entries):
        where = f"{key}[{i}]"
        name = entry.get("policy")
        if name not in known:
            raise ConfigError(f"{where}.policy: unknown policy {name!r}; known policies: {', '.join(known)}")
        out.append(registry[name].configure(entry, where))
    return out
