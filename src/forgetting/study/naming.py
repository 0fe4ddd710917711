"""Configuration names, in one place: a name → its :class:`~forgetting.grid.Deletion`, a
deletion → its name, and a name → the label tables and figures show.

A name is lower-case words joined by ``-``; its first word says which policy it is (the scheme
in config/README.md). The paper's 42 are ``{timing}-{granularity}-{scope}-{amount}``
(:mod:`forgetting.grid`); every other policy writes and reads its own names
(``Policy.canonical_name`` / ``Policy.name_entry``, from the words of
:mod:`forgetting.deletion.names`) and this module dispatches to them:

* :func:`parse_configuration_name` — a name in a config (``configurations.names``,
  ``--deletion``) → its configuration, or one error line saying what is wrong;
* :func:`policy_from_name`, :func:`name_entry` — a name of another policy's scheme → its
  configuration / its config entry;
* :func:`canonical_name` — a configuration → its stable name;
* :func:`policy_label`, :func:`configuration_label` — what the tables and figures print.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from forgetting.deletion.names import parse_selection
from forgetting.deletion.policy import PolicyContext
from forgetting.deletion.registry import policies
from forgetting.foundation.errors import ConfigError
from forgetting.grid import AMOUNTS, BASELINE, TIMINGS, Deletion, paper_configuration

SCOPE_LABELS = {"reasoning": "reasoning", "tool_output": "tool output", "both": "both"}


def _context(context: PolicyContext | None) -> PolicyContext:
    return context if context is not None else PolicyContext.from_config()


# ------------------------------------------------------------------ name → configuration


def name_entry(name: str, key: str = "name") -> dict[str, Any] | None:
    """The config entry a name stands for (``policy`` and the parameters its scheme writes);
    None when it is no policy's name; ConfigError when it starts like one but is malformed."""
    for _, cls in sorted(policies().items()):
        if cls.configurable:
            entry = cls.name_entry(name, key)
            if entry is not None:
                return entry
    return None


def name_schemes() -> dict[str, str]:
    """Policy → its naming scheme."""
    return {n: cls.name_scheme for n, cls in sorted(policies().items()) if cls.configurable}


def policy_from_name(name: str, key: str, context: PolicyContext | None = None) -> Deletion:
    """The configuration a name of any policy's scheme stands for (defaults for what a name
    does not write, e.g. a gate's pricing profile)."""
    entry = name_entry(name, key)
    if entry is None:
        schemes = "; ".join(f"{p}: {s}" for p, s in name_schemes().items())
        raise ConfigError(f"{key}: {name!r} is not a configuration name ({schemes})")
    return policies()[entry["policy"]].configure({**entry, "name": name}, key, _context(context))


def parse_configuration_name(name: str, key: str, context: PolicyContext | None = None) -> Deletion:
    """Resolve one of the paper's configuration names, or a name of another policy's scheme
    (``keep8-turn-tool_output-100``, ``batch4-delayed-turn-tool_output-100``, ``mask10``, …;
    config/README.md), or fail naming what is wrong."""
    try:
        return paper_configuration(name)
    except KeyError:
        pass
    parts = name.split("-")
    if parts[0] not in TIMINGS and name_entry(name, key) is not None:
        return policy_from_name(name, key, context)
    if len(parts) != 4:
        raise ConfigError(
            f"{key}: {name!r} is not a configuration name; expected "
            "{timing}-{granularity}-{scope}-{amount}, e.g. delayed-turn-tool_output-50, 'baseline', "
            "or a name of another policy (config/README.md)"
        )
    timing, amount_s = parts[0], parts[3]
    if timing not in TIMINGS:
        raise ConfigError(
            f"{key}: unknown timing {timing!r} in {name!r}; allowed values: {', '.join(TIMINGS)} "
            "(or keep{K} and the other policies' names in config/README.md)"
        )
    selection = parse_selection(parts[1:], name, key)
    granularity, scope, amount = str(selection["granularity"]), str(selection["scope"]), float(selection["amount"])
    if not 0 < amount <= 100:
        raise ConfigError(f"{key}: amount {amount_s} in {name!r} is outside (0, 100]")
    if granularity == "token" and amount == 100:
        raise ConfigError(
            f"{key}: {name!r}: token granularity at 100 % equals turn-level 100 % and is not run; "
            f"use {timing}-turn-{scope}-100"
        )
    allowed = ", ".join(str(a) for a in AMOUNTS[granularity])
    raise ConfigError(
        f"{key}: {name!r} is not in the paper's grid ({granularity} amounts: {allowed}); "
        "define other amounts under configurations.policies"
    )


# ------------------------------------------------------------------ configuration → name


def canonical_name(deletion: Deletion) -> str:
    """The stable readable name of a configuration (``baseline`` for the baseline)."""
    if deletion.is_baseline:
        return BASELINE
    return policies()[deletion.policy].canonical_name(deletion)


def check_given_name(given: str, deletion: Deletion, where: str) -> None:
    """A ``configurations.policies`` entry's own ``name``: a free label, or its canonical name,
    never a name that reads as another configuration (a name never stands for two)."""
    if given == BASELINE:
        raise ConfigError(f"{where}.name: 'baseline' is the uncompressed reference; choose another name")
    canonical = canonical_name(deletion)
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


# ------------------------------------------------------------------ name → label


def is_paper_like(dims: Mapping[str, Any]) -> bool:
    """The paper's random deletion at one of its two timings (any amount): the configurations
    the paper's pairings (delayed → immediate, turn → token) and panels are made of."""
    if dims.get("policy") not in (None, "random") or dims.get("timing") not in TIMINGS:
        return False
    keep = dims.get("keep_last")
    return keep is None or int(keep) == TIMINGS[str(dims["timing"])]


def _scheme_label(name: str) -> str | None:
    """The short label of a name of some policy's scheme; None for a free label."""
    try:
        entry = name_entry(name)
    except ConfigError:
        return None
    if entry is None:
        return None
    return policies()[entry["policy"]].label(entry)


def policy_label(name: str, dims: Mapping[str, Any]) -> str:
    """What sets a configuration apart from the paper's: its timing for the paper's policy,
    else a short label of its policy (``batched ×4 · delayed``, ``keep 8``), else (a free
    label) its name."""
    if name == BASELINE:
        return "baseline"
    if is_paper_like(dims):
        return str(dims["timing"])
    return _scheme_label(name) or name


def amount_value(value: Any) -> float:
    """An amount as a number to sort by; infinity for none."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        return math.inf
    return math.inf if math.isnan(out) else out


def amount_label(value: Any) -> str:
    """``50``, ``12.5``; empty for no amount."""
    a = amount_value(value)
    if math.isinf(a):
        return ""
    return f"{int(a)}" if a.is_integer() else f"{a:g}"


def configuration_label(name: str, dims: Mapping[str, Any]) -> str:
    """E.g. ``tool output · turn · 50 %`` for delayed-turn-tool_output-50 (timing is shown apart)."""
    if name == BASELINE:
        return "baseline"
    if dims.get("policy") not in (None, "random") or dims.get("scope") is None:
        return name
    scope = SCOPE_LABELS.get(str(dims["scope"]), dims["scope"])
    return f"{scope} · {dims.get('granularity')} · {amount_label(dims.get('amount'))} %"
