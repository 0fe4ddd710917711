"""``config/README.md``'s key reference, generated from the config schema.

The README is prose written by hand with tables generated in between: each table stands
between two markers naming what it lists::

    <!-- config-reference: execution -->
    …generated…
    <!-- /config-reference -->

One object's path (``execution``, ``model.scripted``, ``configurations.policies[]`` for the
items of a list) lists its keys by their names within it; several paths (``tasks dataset``,
``only only_agents``) list their keys by full name. An object within is listed key by key
(``placeholders.reasoning``) unless a table of its own elsewhere in the document lists it.
Each row: the key, its values (type, allowed values, bounds), its default (or what leaving it
out means: ``x-default``; ``required``) and its meaning (``description``) — all from the schema.

Regenerate after changing the schema (the tests fail while the README is out of date)::

    python -m forgetting.study.config_reference --write config/README.md
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from forgetting.foundation.atomic import write_text
from forgetting.foundation.config_schema import PROJECT_ROOT, load_schema

README = PROJECT_ROOT / "config" / "README.md"
COMMAND = "python -m forgetting.study.config_reference --write config/README.md"
BLOCK = re.compile(r"(<!-- config-reference: (?P<paths>[^>]*?) -->\n)(?P<body>.*?)(<!-- /config-reference -->)", re.S)
HEADER = "| key | value | default | meaning |\n|---|---|---|---|\n"


def _node(schema: Mapping[str, Any], path: str) -> tuple[Mapping[str, Any], Mapping[str, Any] | None]:
    """The schema of ``path`` and of the object holding it (``a.b``, ``a.list[]`` for items)."""
    node, parent = schema, None
    for key in path.split("."):
        items = key.endswith("[]")
        key = key.removesuffix("[]")
        props = node.get("properties") or {}
        if key not in props:
            raise KeyError(f"config-reference: the schema has no key {path!r}")
        parent, node = node, props[key]
        if items:
            parent, node = node, node["items"]
    return node, parent


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_literal(v)}" for k, v in value.items()) + "}"
    return str(value)


def _shown(value: Any) -> str:
    """A value as the tables show it: numbers plain, everything else as code."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _literal(value)
    return f"`{_literal(value)}`"


def _bounds(spec: Mapping[str, Any]) -> str:
    low, high = spec.get("minimum", spec.get("exclusiveMinimum")), spec.get("maximum", spec.get("exclusiveMaximum"))
    if low is not None and high is not None:
        left = "(" if "exclusiveMinimum" in spec else "["
        right = ")" if "exclusiveMaximum" in spec else "]"
        return f" in {left}{_literal(low)}, {_literal(high)}{right}"
    if low is not None:
        return f" {'>' if 'exclusiveMinimum' in spec else '≥'} {_literal(low)}"
    if high is not None:
        return f" {'<' if 'exclusiveMaximum' in spec else '≤'} {_literal(high)}"
    return ""


_PLURAL = {"text": "texts", "integer": "integers", "number": "numbers", "mapping": "mappings"}


def value_text(spec: Mapping[str, Any]) -> str:
    """What a key takes: ``integer ≥ 1``, ``number in [0, 1]``, ``\\`fail\\`, \\`mark\\```, …"""
    if "oneOf" in spec:
        return " or ".join(value_text(s) for s in spec["oneOf"])
    if "enum" in spec:
        return ", ".join(_shown(v) for v in spec["enum"])
    kind = spec.get("type")
    if kind == "boolean":
        return "`true` / `false`"
    if kind in ("integer", "number"):
        return f"{kind}{_bounds(spec)}"
    if kind == "string":
        return "text"
    if kind == "array":
        items = value_text(spec.get("items") or {})
        head, _, rest = items.partition(" ")
        return f"list of {_PLURAL.get(head, head)}{' ' + rest if rest else ''}"
    if kind == "object":
        return "mapping"
    if kind == "null":
        return "`null`"
    return "any"


def _conditional_defaults(parent: Mapping[str, Any] | None, key: str) -> list[str]:
    """``kind``: default, for a default the schema gives by another key (``allOf``/``if``/``then``)."""
    out = []
    for rule in (parent or {}).get("allOf") or ():
        then = ((rule.get("then") or {}).get("properties") or {}).get(key)
        if then and "default" in then:
            cond = ", ".join(f"{_shown(v.get('const'))}" for v in (rule["if"].get("properties") or {}).values())
            out.append(f"{cond}: {_shown(then['default'])}")
    return out


def default_text(spec: Mapping[str, Any], key: str, parent: Mapping[str, Any] | None) -> str:
    if "default" in spec:
        return _shown(spec["default"])
    conditional = _conditional_defaults(parent, key)
    if conditional:
        return "; ".join(conditional)
    if "x-default" in spec:
        return str(spec["x-default"])
    if key in ((parent or {}).get("required") or ()):
        return "required"
    return "—"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _rows(
    obj: Mapping[str, Any], prefix: str, path: str, own_tables: set[str]
) -> Iterator[tuple[list[str], Mapping[str, Any], str, Mapping[str, Any]]]:
    """(names, schema, key, parent) of each key of ``obj``, objects within flattened unless
    they have a table of their own; keys sharing one schema (a YAML alias) in one row."""
    props = obj.get("properties") or {}
    groups: dict[int, list[str]] = {}
    for key, spec in props.items():
        groups.setdefault(id(spec), []).append(key)
    for keys in groups.values():
        spec = props[keys[0]]
        yield [f"{prefix}{k}" for k in keys], spec, keys[0], obj
        full = [f"{path}{k}" for k in keys]
        if spec.get("type") == "object" and spec.get("properties") and not own_tables & set(full):
            for names, sub, sub_key, sub_parent in _rows(spec, "", f"{full[0]}.", own_tables):
                yield [f"{p}{k}." + n for k in keys for p in [prefix] for n in names], sub, sub_key, sub_parent


def _block_rows(
    paths: Sequence[str], own_tables: set[str], schema: Mapping[str, Any]
) -> Iterator[tuple[list[str], Mapping[str, Any], str, Mapping[str, Any]]]:
    if len(paths) == 1:
        node, _ = _node(schema, paths[0])
        if node.get("properties"):  # one object: its keys by their own names
            yield from _rows(node, "", f"{paths[0]}.", own_tables)
            return
    for path in paths:  # several: every key by its full name
        node, parent = _node(schema, path)
        if node.get("properties"):
            yield from _rows(node, f"{path}.", f"{path}.", own_tables)
        else:
            yield [path], node, path.rsplit(".", 1)[-1], parent or schema


def table(paths: Sequence[str], own_tables: set[str], schema: Mapping[str, Any] | None = None) -> str:
    """The generated table of one block."""
    lines = []
    for names, spec, key, parent in _block_rows(paths, own_tables, schema or load_schema()):
        cells = [", ".join(f"`{n}`" for n in names), value_text(spec), default_text(spec, key, parent),
                 spec.get("description", "")]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return HEADER + "\n".join(lines) + "\n"


def render(text: str, schema: Mapping[str, Any] | None = None) -> str:
    """``text`` (the README) with every generated table made anew from the schema."""
    blocks = [m.group("paths").split() for m in BLOCK.finditer(text)]
    own_tables = {p for paths in blocks if len(paths) == 1 for p in paths}

    def one(m: re.Match[str]) -> str:
        paths = m.group("paths").split()
        return f"{m.group(1)}\n{table(paths, own_tables - set(paths), schema)}\n{m.group(4)}"

    return BLOCK.sub(one, text)


def listed_keys(text: str, schema: Mapping[str, Any] | None = None) -> set[str]:
    """Every key (full dotted path, ``[]`` for list items) some table of ``text`` lists, and
    the objects that have a table of their own."""
    schema = schema or load_schema()
    out: set[str] = set()
    for m in BLOCK.finditer(text):
        for path in m.group("paths").split():
            out.add(path)
            node, _ = _node(schema, path)
            out |= {f"{path}.{k}" for k in _flat_keys(node)}
    return out


def _flat_keys(obj: Mapping[str, Any]) -> Iterator[str]:
    for key, spec in (obj.get("properties") or {}).items():
        yield key
        for sub in _flat_keys(spec):
            yield f"{key}.{sub}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m forgetting.study.config_reference", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", metavar="README", help="regenerate the tables of this file in place")
    mode.add_argument("--check", metavar="README", help="exit 1 when this file's tables are out of date")
    args = parser.parse_args(argv)
    path = Path(args.write or args.check)
    if not path.is_file():
        print(f"error: {path}: not found", file=sys.stderr)
        return 2
    text = path.read_text(encoding="utf-8")
    try:
        new = render(text)
    except KeyError as exc:
        print(f"error: {path}: {exc.args[0]}", file=sys.stderr)
        return 2
    if args.check:
        if new != text:
            print(f"{path} is out of date with the config schema; regenerate it: {COMMAND}", file=sys.stderr)
            return 1
        return 0
    if new != text:
        write_text(path, new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
