"""Deletion policies defined in a study config (``configurations.policies``).

Each entry names a policy (:mod:`forgetting.deletion.registry`) with its parameters;
the policy checks them and returns a :class:`~forgetting.grid.Deletion`, the one type every
consumer (planner, proxy, analysis) sees. The paper's own policy, ``random``, is
configurable here with other amounts and retention delays than the 42.

An entry without ``name`` gets its canonical name; a given name is a free label unless it
reads as a name of a policy's scheme, in which case it must say what the entry configures
(:func:`forgetting.deletion.names.check_given_name`). Names themselves — reading, writing, labelling —
are :mod:`forgetting.deletion.names`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from forgetting.deletion.names import check_given_name
from forgetting.deletion.policy import PolicyContext
from forgetting.deletion.registry import configurable_policies, policies
from forgetting.foundation.errors import ConfigError
from forgetting.grid import Deletion


def build_policies(
    entries: Iterable[Mapping[str, Any]], key: str, context: PolicyContext
) -> list[Deletion]:
    """One :class:`Deletion` per config entry; ConfigError (one line) for a bad entry.
    ``context`` carries the turn cap and the price sheets some policies read."""
    registry = policies()
    known = configurable_policies()
    out = []
    for i, entry in enumerate(entries):
        where = f"{key}[{i}]"
        name = entry.get("policy")
        if name not in known:
            raise ConfigError(f"{where}.policy: unknown policy {name!r}; known policies: {', '.join(known)}")
        d = registry[name].configure(entry, where, context)
        if entry.get("name"):
            check_given_name(str(entry["name"]), d, where)
        out.append(d)
    return out
