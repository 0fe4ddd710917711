"""Deletion policies defined in a study config (``configurations.policies``) and their names.

Each entry names a registered policy (:mod:`forgetting.deletion.policy`) with its parameters;
the policy checks them and returns a :class:`~forgetting.grid.Deletion`, the one type every
consumer (planner, proxy, analysis) sees. The paper's own policy, ``random``, is
configurable here with other amounts and retention delays than the 42.

Names: every policy has a naming scheme (:mod:`forgetting.deletion.names`) that writes a
configuration's parameters into a stable readable name and reads them back. An entry
without ``name`` gets its canonical name; a given name is a free label unless it reads as a
name of the scheme, in which case it must say what the entry configures. The same names may
be listed in ``configurations.names`` (:func:`policy_from_name`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from forgetting.errors import ConfigError
from forgetting.grid import BASELINE, Deletion


def _context(context: Any) -> Any:
    from forgetting.deletion.policy import PolicyContext

    return context if context is not None else PolicyContext.from_config()


def name_entry(name: str, key: str = "name") -> dict[str, Any] | None:
    """The config entry a name stands for (``policy`` and the parameters its scheme writes);
    None when it is no policy's name; ConfigError when it starts like one but is malformed."""
    from forgetting.deletion.policy import policies

    for _, cls in sorted(policies().items()):
        if cls.configurable:
            entry = cls.name_entry(name, key)
            if entry is not None:
                return entry
    return None


def name_schemes() -> dict[str, str]:
    """Policy → its naming scheme."""
    from forgetting.deletion.policy import policies

    return {n: cls.name_scheme for n, cls in sorted(policies().items()) if cls.configurable}


def policy_from_name(name: str, key: str, context: Any = None) -> Deletion:
    """The configuration a name of any policy's scheme stands for (defaults for what a name
    does not write, e.g. a gate's pricing profile)."""
    from forgetting.deletion.policy import policies

    entry = name_entry(name, key)
    if entry is None:
        schemes = "; ".join(f"{p}: {s}" for p, s in name_schemes().items())
        raise ConfigError(f"{key}: {name!r} is not a configuration name ({schemes})")
    return policies()[entry["policy"]].configure({**entry, "name": name}, key, _context(context))


def canonical_name(deletion: Deletion) -> str:
    """The stable readable name of a configuration (``baseline`` for the baseline)."""
    from forgetting.deletion.policy import policies

    if deletion.is_baseline:
        return BASELINE
    return policies()[deletion.policy].canonical_name(deletion)


def policy_label(name: str) -> str | None:
    """A short label for a name of some policy's scheme (``batched ×4 · delayed``); None for a
    free label or the baseline."""
    from forgetting.deletion.policy import policies

    try:
        entry = name_entry(name)
    except ConfigError:
        return None
    if entry is None:
        return None
    return policies()[entry["policy"]].label(entry)


def _check_name(given: str, d: Deletion, where: str) -> None:
    if given == BASELINE:
        raise ConfigError(f"{where}.name: 'baseline' is the uncompressed reference; choose another name")
    canonical = canonical_name(d)
    if given == canonical:
        return
    try:
        means = name_entry(given, where)
    except ConfigError:
        means = None
    if means is not None:
        raise ConfigError(
            f"{where}.name: {given!r} reads as another configuration than the entry's "
            f"({canonical!r}); leave name out or give a label that is not a configuration name"
        )


def build_policies(entries: Iterable[Mapping[str, Any]], key: str, context: Any = None) -> list[Deletion]:
    """One :class:`Deletion` per config entry; ConfigError (one line) for a bad entry.
    ``context`` (a :class:`~forgetting.deletion.policy.PolicyContext`) carries the turn cap and
    the price sheets some policies read."""
    from forgetting.deletion.policy import configurable_policies, policies

    registry = policies()
    known = configurable_policies()
    out = []
    for i, entry in enumerate(entries):
        where = f"{key}[{i}]"
        name = entry.get("policy")
        if name not in known:
            raise ConfigError(f"{where}.policy: unknown policy {name!r}; known policies: {', '.join(known)}")
        d = registry[name].configure(entry, where, _context(context))
        if entry.get("name"):
            _check_name(str(entry["name"]), d, where)
        out.append(d)
    return out
