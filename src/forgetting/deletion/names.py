"""The words configuration names are made of (the naming scheme in ``config/README.md``).

A name is lower-case words joined by ``-``. Its first word says which policy it is:

==============================  =====================================================
``{retention}-{selection}``     ``random`` (the paper's 42 and other delays/amounts)
``batch{k}-{retention}-{sel}``  ``batch``: rewritten every ``k`` calls
``gate[{H}]-{retention}-{sel}`` ``gate``: rewritten when the saving pays for the re-billing
``reuse{N}-{retention}``        ``reuse``: tool outputs of files untouched for ``N`` turns
``mask{M}``                     ``mask``: observation masking, last ``M`` turns verbatim
==============================  =====================================================

``{retention}`` is ``delayed`` (``keep_last`` 2), ``immediate`` (0) or ``keep{K}`` (any
other ``K``); ``{selection}`` is ``{granularity}-{scope}-{amount}`` as in the paper's names.
Each policy module writes and reads its own names from these words; the rest of this module reads,
writes and labels any name:

* :func:`parse_configuration_name` — a name in a config (``configurations.names``,
  ``--deletion``) → its configuration, or one error line saying what is wrong;
* :func:`policy_from_name`, :func:`name_entry` — a name of another policy's scheme → its
  configuration / its config entry;
* :func:`canonical_name` — a configuration → its stable name;
* :func:`policy_label`, :func:`configuration_label` — what the tables and figures print.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from forgetting.foundation.errors import ConfigError
from forgetting.grid import AMOUNTS, BASELINE, GRANULARITIES, SCOPES, TIMINGS, Deletion, paper_configuration, timing_of

if TYPE_CHECKING:
    from forgetting.deletion.policy import Policy, PolicyContext

_KEEP = re.compile(r"^keep(\d+)$")


def amount_text(amount: float | int) -> str:
    """``100`` for 100.0, ``12.5`` for 12.5 (as the paper's names write amounts)."""
    a = float(amount)
    return str(int(a)) if a.is_integer() else repr(a)


def retention_word(keep_last: int) -> str:
    """``delayed``, ``immediate`` or ``keep{K}``."""
    for timing, k in TIMINGS.items():
        if k == keep_last:
            return timing
    return f"keep{keep_last}"


def parse_retention(word: str, name: str, key: str) -> int | None:
    """``keep_last`` of a retention word; None when ``word`` is not one."""
    if word in TIMINGS:
        return TIMINGS[word]
    m = _KEEP.match(word)
    if m is None:
        return None
    k = int(m.group(1))
    timing = timing_of(k)
    if timing is not None:
        raise ConfigError(f"{key}: {name!r}: write {word!r} as {timing!r} (keep_last {k})")
    return k


def numbered(word: str, prefix: str, *, optional: bool = False) -> int | bool | None:
    """The number after ``prefix`` in ``word`` (``batch4`` → 4); False when ``word`` is not
    ``prefix`` followed by digits; None for a bare ``prefix`` when the number is optional."""
    if not word.startswith(prefix):
        return False
    rest = word[len(prefix) :]
    if not rest:
        return None if optional else False
    return int(rest) if rest.isdigit() else False


def split_numbered(name: str, prefix: str, *, optional: bool = False) -> tuple[int | None, list[str]] | None:
    """A name whose first word is ``prefix`` and a number (:func:`numbered`): that number and
    the words after it; None when the name is not of that prefix."""
    first, *rest = name.split("-")
    n = numbered(first, prefix, optional=optional)
    return None if n is False else (n, rest)  # type: ignore[return-value]


def selection_words(granularity: str | None, scope: str | None, amount: float | None) -> str:
    return f"{granularity}-{scope}-{amount_text(amount or 0)}"


def parse_selection(words: list[str], name: str, key: str) -> dict[str, object]:
    """``granularity``, ``scope`` and ``amount`` from the three selection words of ``name``."""
    if len(words) != 3:
        raise ConfigError(f"{key}: {name!r}: expected {{granularity}}-{{scope}}-{{amount}} after the policy word")
    granularity, scope, amount_s = words
    if granularity not in GRANULARITIES:
        raise ConfigError(
            f"{key}: unknown granularity {granularity!r} in {name!r}; allowed values: {', '.join(GRANULARITIES)}"
        )
    if scope not in SCOPES:
        raise ConfigError(f"{key}: unknown scope {scope!r} in {name!r}; allowed values: {', '.join(SCOPES)}")
    try:
        amount = float(amount_s)
    except ValueError:
        raise ConfigError(f"{key}: amount {amount_s!r} in {name!r} is not a number; allowed: (0, 100]") from None
    out: dict[str, object] = {"granularity": granularity, "scope": scope}
    out["amount"] = int(amount) if amount.is_integer() else amount
    return out

SCOPE_LABELS = {"reasoning": "reasoning", "tool_output": "tool output", "both": "both"}


def policies() -> dict[str, type[Policy]]:
    """The registered policies by name (:func:`forgetting.deletion.registry.policies`). Imported
    when first asked: the policy modules import this module's words, and the registry loads them."""
    from forgetting.deletion.registry import policies as registered

    return registered()


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


def policy_from_name(name: str, key: str, context: PolicyContext) -> Deletion:
    """The configuration a name of any policy's scheme stands for (defaults for what a name
    does not write, e.g. a gate's pricing profile)."""
    entry = name_entry(name, key)
    if entry is None:
        schemes = "; ".join(f"{p}: {s}" for p, s in name_schemes().items())
        raise ConfigError(f"{key}: {name!r} is not a configuration name ({schemes})")
    return policies()[entry["policy"]].configure({**entry, "name": name}, key, context)


def parse_configuration_name(name: str, key: str, context: PolicyContext) -> Deletion:
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
