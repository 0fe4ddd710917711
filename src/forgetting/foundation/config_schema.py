"""The study config's JSON schema, ``workflow/schemas/config.schema.yaml``: the one statement
of every key's type, allowed values, default and meaning.

Defaults are filled from it once, when a study is loaded (:func:`fill_defaults`, also what
``snakemake.utils.validate`` does for the Snakefile), and settings classes read the filled
sections as they are (``section["turn_cap"]``), never with a second default in code. Code
handed a part of a config instead of a study — a settings class built in a test, a section
given on a command line — checks and fills it with :func:`section`. ``config/README.md``'s
key reference is generated from the same schema (:mod:`forgetting.study.config_reference`).

Beyond plain ``default`` values the schema states defaults that depend on another key of
the same object as ``allOf: [{if: …, then: {properties: {key: {default: …}}}}]``
(``dataset.instances`` by ``dataset.kind``); :func:`fill_defaults` applies the ``then`` of
each ``if`` the object matches, as Snakemake's validation does.
"""

from __future__ import annotations

import abc
import collections
import copy
import functools
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Self

import jsonschema
import yaml

from forgetting.foundation.errors import ConfigError

#: the package's own directory (src/forgetting/)
PACKAGE_DIR = Path(__file__).resolve().parent.parent
#: the repository root when running from a checkout (schema, resources and configs live there)
PROJECT_ROOT = PACKAGE_DIR.parent.parent
SCHEMA_PATH = PROJECT_ROOT / "workflow" / "schemas" / "config.schema.yaml"


@functools.cache
def load_schema() -> dict[str, Any]:
    with open(SCHEMA_PATH, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def schema_at(path: str) -> Mapping[str, Any]:
    """The schema of one section: ``"execution.proxy"`` → the schema of ``execution.proxy``."""
    node: Mapping[str, Any] = load_schema()
    for key in path.split("."):
        props = node.get("properties") or {}
        if key not in props:
            raise KeyError(f"the config schema has no key {path!r}")
        node = props[key]
    return node


def key_path(path: Sequence[Any]) -> str:
    """``a.b[0].c`` for a JSON path; ``(top level)`` for the empty one."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def error_line(error: jsonschema.ValidationError, prefix: str = "") -> str:
    """One line naming the key at fault and what is allowed (``prefix``: the section's path)."""
    rel = key_path(error.absolute_path)
    key = (f"{prefix}.{rel}" if error.absolute_path else prefix) if prefix else rel
    if error.validator == "additionalProperties":
        allowed = sorted((error.schema.get("properties") or {}).keys())
        return f"{key}: {error.message}; allowed keys: {', '.join(allowed)}"
    if error.validator == "enum":
        return f"{key}: {error.instance!r} is not allowed; allowed values: {', '.join(map(str, error.validator_value))}"
    if error.validator in ("pattern", "minLength") and "x-pattern-says" in error.schema:
        return f"{key}: {error.instance!r} {error.schema['x-pattern-says']}"
    if error.validator == "oneOf":
        kinds = [s.get("type") or s.get("enum") for s in error.validator_value]
        return f"{key}: {error.instance!r} has the wrong form; expected one of {kinds}"
    return f"{key}: {error.message}"


@functools.cache
def _validator(path: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(load_schema() if path == "" else schema_at(path))


def non_finite(value: Any) -> tuple[list[Any], float] | None:
    """The path to the first number in ``value`` that is not finite (YAML ``.nan``, ``.inf``,
    ``-.inf``) and that number, or None. jsonschema's bounds cannot refuse them (every
    comparison with NaN is false; JSON has no infinity), so they are refused here, for every
    key at once, before any key's own check (iterative: a deep document cannot exhaust the stack)."""
    stack: list[tuple[Any, list[Any]]] = [(value, [])]
    while stack:
        node, where = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            return where, node
        if isinstance(node, dict):
            stack.extend((v, [*where, k]) for k, v in reversed(list(node.items())))
        elif isinstance(node, list):
            stack.extend((v, [*where, i]) for i, v in reversed(list(enumerate(node))))
    return None


def spelt(number: float) -> str:
    """A non-finite number as YAML writes it (``.nan``, ``.inf``, ``-.inf``)."""
    return ".nan" if math.isnan(number) else (".inf" if number > 0 else "-.inf")


def first_error(config: Any, path: str = "") -> jsonschema.ValidationError | None:
    """The error of ``config`` under the schema of ``path`` (``""``: the whole config) that is
    reported: a number that is not finite anywhere in it first (:func:`non_finite`), then the
    shallowest, then by path."""
    bad = non_finite(config)
    if bad is not None:
        where, number = bad
        return jsonschema.ValidationError(
            f"{spelt(number)} is not a finite number (NaN and infinities are refused)",
            validator="finite", path=collections.deque(where), instance=number,
        )
    errors = sorted(_validator(path).iter_errors(config), key=lambda e: (len(e.absolute_path), str(e.absolute_path)))
    return errors[0] if errors else None


def fill_defaults(config: dict[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """Fill the schema's ``default`` values into ``config``, in place (recursively, objects
    only; the ``then`` of each ``allOf`` rule whose ``if`` the object matches)."""
    props = schema.get("properties") or {}
    for key, sub in props.items():
        if key not in config and "default" in sub:
            config[key] = copy.deepcopy(sub["default"])
        if isinstance(config.get(key), dict) and sub.get("type") == "object":
            fill_defaults(config[key], sub)
    for rule in schema.get("allOf") or ():
        if "if" in rule and "then" in rule and jsonschema.Draft202012Validator(rule["if"]).is_valid(config):
            fill_defaults(config, rule["then"])
    return config


def filled(config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a (possibly partial) config with every default of the schema filled in, not
    checked: what code handed part of a config reads (its sections checked by :func:`section`)."""
    return fill_defaults(copy.deepcopy(dict(config)), load_schema())


def section(path: str, values: Mapping[str, Any] | None = None, *, source: str | None = None) -> dict[str, Any]:
    """One section of a config (``values``, may be partial or None), checked against its
    schema — a bad value is one :class:`ConfigError` line naming ``path.key`` (after
    ``source``) — with every default filled in. An already filled section comes back equal."""
    schema = schema_at(path)
    data = copy.deepcopy(dict(values or {}))
    error = first_error(data, path)
    if error is not None:
        line = error_line(error, path)
        raise ConfigError(f"{source}: {line}" if source else line)
    return fill_defaults(data, schema)


def config_path(value: str | os.PathLike[str], root: str | os.PathLike[str] | None) -> Path:
    """A path from the config: ``~`` and ``$VARS`` expanded, a relative one against ``root``
    (a study's root; None: as given)."""
    path = Path(os.path.expandvars(os.path.expanduser(str(value))))
    return path if root is None or path.is_absolute() else Path(root) / path


def defaults(path: str) -> dict[str, Any]:
    """The defaults of a section: what it holds when a config leaves it out."""
    return section(path)


class Section:
    """A typed config section. ``from_filled`` builds it from a section that is already checked
    and filled (what a loaded study holds: :mod:`forgetting.study.sections` builds every one once,
    when the study is loaded); :meth:`from_section` checks a part of one first — the one check of a
    section handed in apart from a study (a test, a command line's own values)."""

    #: the section's path in the config (``"execution.proxy"``)
    PATH: ClassVar[str]

    @classmethod
    @abc.abstractmethod
    def from_filled(cls, values: Mapping[str, Any], **context: Any) -> Self:
        """The section from its checked, filled values (each section class says how)."""

    @classmethod
    def from_section(cls, values: Mapping[str, Any] | None = None, *, source: str | None = None,
                     **context: Any) -> Self:
        """From ``values`` (part of the section or None: checked against the schema, a bad value
        one line naming ``PATH.key``; its defaults filled); ``context``: what ``from_filled`` takes."""
        return cls.from_filled(section(cls.PATH, values, source=source), **context)
