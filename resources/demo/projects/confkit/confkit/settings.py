"""Layered settings: sources merged in order, values typed when they are read.

::

    settings = Settings([
        MappingSource(DEFAULTS, name="defaults"),
        DotEnvSource(".env", required=False),
        EnvSource("APP"),
    ])
    settings.get_int("db.port")

Later sources override earlier ones, key by key. Keys are dotted and case-insensitive
(``"DB.Host"`` is ``"db.host"``). Reading a value with a kind (``get_int``,
``get(key, kind="size")``) coerces it with :mod:`confkit.coerce`; coerced values are
cached until the settings change, which only :meth:`Settings.reload`,
:meth:`Settings.add_source` and :meth:`Settings.override` do.

Declared :class:`Field` objects add defaults, required keys, kinds and allowed choices;
:meth:`Settings.validate` lists what does not conform.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confkit.coerce import KINDS, CoercionError, coerce, to_list
from confkit.sources import DotEnvSource, EnvSource, IniSource, Source, flatten

__all__ = ["Field", "MissingSettingError", "Settings", "SettingsError", "nest"]


class _Missing:
    """The type of :data:`MISSING`, the marker for "no default given"."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class SettingsError(ValueError):
    """Settings that cannot be read or do not conform to their declared fields."""


class MissingSettingError(SettingsError, KeyError):
    """A key that no source sets and that has no default."""

    def __init__(self, key: str, looked_in: Sequence[str]) -> None:
        where = ", ".join(looked_in) or "no sources"
        super().__init__(f"setting {key!r} is not set (looked in: {where})")
        self.key = key

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])


def _key(name: str) -> str:
    key = name.strip().lower()
    if not key or any(not part for part in key.split(".")):
        raise SettingsError(f"not a setting key: {name!r}")
    return key


@dataclass(frozen=True)
class Field:
    """A declared setting: its kind, default, whether it is required, allowed choices."""

    key: str
    kind: str = "str"
    default: Any = MISSING
    required: bool = False
    choices: tuple[Any, ...] | None = None
    help: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", _key(self.key))
        if self.kind not in KINDS:
            raise SettingsError(f"field {self.key}: unknown kind {self.kind!r}")
        if self.required and self.default is not MISSING:
            raise SettingsError(f"field {self.key}: a required field cannot have a default")


def nest(flat: Mapping[str, Any]) -> dict[str, Any]:
    """Dotted keys to nested dicts: ``{"db.host": "x"}`` -> ``{"db": {"host": "x"}}``."""
    out: dict[str, Any] = {}
    for key in sorted(flat):
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise SettingsError(f"{key!r} is below {part!r}, which has a value of its own")
            node = child
        if isinstance(node.get(leaf), dict):
            raise SettingsError(f"{key!r} has a value and settings below it")
        node[leaf] = flat[key]
    return out


class Settings:
    """Settings merged from ``sources`` (later ones win), with optional declared ``fields``."""

    def __init__(self, sources: Iterable[Source] = (), *, fields: Iterable[Field] = ()) -> None:
        self._sources: list[Source] = list(sources)
        self._fields: dict[str, Field] = {}
        for field in fields:
            if field.key in self._fields:
                raise SettingsError(f"field {field.key} declared twice")
            self._fields[field.key] = field
        self._overrides: list[dict[str, Any]] = []
        self._typed: dict[tuple[str, str], Any] = {}
        self._loaded: list[tuple[str, dict[str, Any]]] = []
        self._values: dict[str, Any] = {}
        self._origins: dict[str, list[str]] = {}
        self.reload()

    @classmethod
    def from_files(cls, *paths: str | Path, env_prefix: str | None = None) -> Settings:
        """Settings from files by suffix (``.env``; ``.ini``/``.cfg``), then the environment.

        Files that do not exist are skipped; the environment, when ``env_prefix`` is
        given, overrides them all.
        """
        sources: list[Source] = []
        for path in map(Path, paths):
            if path.name == ".env" or path.suffix == ".env":
                sources.append(DotEnvSource(path, required=False))
            elif path.suffix in (".ini", ".cfg"):
                sources.append(IniSource(path, required=False))
            else:
                raise SettingsError(f"{path}: unknown settings file type (use .env, .ini or .cfg)")
        if env_prefix:
            sources.append(EnvSource(env_prefix))
        return cls(sources)

    # ------------------------------------------------------------------ loading

    @property
    def sources(self) -> tuple[Source, ...]:
        return tuple(self._sources)

    def add_source(self, source: Source) -> None:
        """Add a source that overrides all current ones, and read it."""
        self._sources.append(source)
        self._loaded.append((source.name, source.load()))
        self._refresh()

    def reload(self) -> None:
        """Read every source again; values read afterwards reflect their current contents."""
        self._loaded = [(source.name, source.load()) for source in self._sources]
        self._refresh()

    def _merge(self) -> tuple[dict[str, Any], dict[str, list[str]]]:
        """Defaults, loaded sources and overrides merged: values, and the layers setting each key."""
        values: dict[str, Any] = {}
        origins: dict[str, list[str]] = {}
        layers: list[tuple[str, Mapping[str, Any]]] = [
            ("default", {k: f.default for k, f in self._fields.items() if f.default is not MISSING}),
            *self._loaded,
            *(("override", layer) for layer in self._overrides),
        ]
        for name, layer in layers:
            for key, value in layer.items():
                values[key] = value
                origins.setdefault(key, []).append(name)
        return values, origins

    def _refresh(self) -> None:
        """Merge the layers again and forget every coerced value."""
        self._values, self._origins = self._merge()
        self._typed.clear()

    @contextmanager
    def override(self, values: Mapping[str, Any] | None = None, **more: Any) -> Iterator[Settings]:
        """Temporarily set values over every source (for tests and command-line flags).

        Nested mappings and dotted keys are both accepted; keyword names use ``__`` for
        dots (``db__port=5433``).
        """
        layer = {_key(k): v for k, v in flatten(dict(values or {})).items()}
        layer.update({_key(k.replace("__", ".")): v for k, v in more.items()})
        self._overrides.append(layer)
        self._refresh()
        try:
            yield self
        finally:
            self._overrides.remove(layer)
            self._refresh()

    # ------------------------------------------------------------------ reading

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and _key(key) in self._values

    def __len__(self) -> int:
        return len(self._values)

    def keys(self) -> list[str]:
        return sorted(self._values)

    def origin(self, key: str) -> str:
        """The name of the layer that set ``key``'s current value."""
        key = _key(key)
        if key not in self._origins:
            raise self._missing(key)
        return self._origins[key][-1]

    def explain(self, key: str) -> str:
        """Where ``key``'s value comes from: ``"db.port = '5433' (from .env; overrides defaults)"``."""
        key = _key(key)
        if key not in self._values:
            raise self._missing(key)
        *earlier, last = self._origins[key]
        text = f"{key} = {self._values[key]!r} (from {last}"
        if earlier:
            text += f"; overrides {', '.join(reversed(earlier))}"
        return text + ")"

    def _missing(self, key: str) -> MissingSettingError:
        return MissingSettingError(key, [s.name for s in self._sources])

    def raw(self, key: str) -> Any:
        """The value as the winning layer gave it, uncoerced."""
        key = _key(key)
        if key not in self._values:
            raise self._missing(key)
        return self._values[key]

    def _typed_value(self, key: str, kind: str, convert: Callable[[Any], Any] | None = None) -> Any:
        cache_key = (key, kind)
        if cache_key not in self._typed:
            try:
                self._typed[cache_key] = (convert or KINDS[kind])(self._values[key])
            except CoercionError as exc:
                raise SettingsError(f"{key} (from {self.origin(key)}): {exc}") from None
        return self._typed[cache_key]

    def get(self, key: str, default: Any = MISSING, *, kind: str | None = None) -> Any:
        """``key``'s value, coerced to ``kind`` (or to its declared field's kind).

        Without a value and without ``default``, raises :class:`MissingSettingError`.
        The default is returned as given, not coerced.
        """
        key = _key(key)
        if key not in self._values:
            if default is MISSING:
                raise self._missing(key)
            return default
        if kind is None and key in self._fields:
            kind = self._fields[key].kind
        if kind is None:
            return self._values[key]
        return self._typed_value(key, kind)

    def get_str(self, key: str, default: Any = MISSING) -> str:
        return self.get(key, default, kind="str")

    def get_bool(self, key: str, default: Any = MISSING) -> bool:
        return self.get(key, default, kind="bool")

    def get_int(self, key: str, default: Any = MISSING) -> int:
        return self.get(key, default, kind="int")

    def get_float(self, key: str, default: Any = MISSING) -> float:
        return self.get(key, default, kind="float")

    def get_size(self, key: str, default: Any = MISSING) -> int:
        """A size in bytes (``"64MiB"``), see :func:`confkit.coerce.to_size`."""
        return self.get(key, default, kind="size")

    def get_list(self, key: str, default: Sequence[str] | None = None, *, separator: str = ",") -> list[str]:
        """``key``'s items (see :func:`confkit.coerce.to_list`); a missing key gives
        ``default`` (an empty list when not given).

        Every call returns a new list, which the caller may change freely.
        """
        key = _key(key)
        if key not in self._values:
            return list(default) if default is not None else []
        items = self._typed_value(key, f"list{separator}", lambda v: to_list(v, separator))
        return list(items)

    def require(self, *keys: str) -> None:
        """Raise :class:`MissingSettingError` for the first of ``keys`` that is not set."""
        for key in keys:
            if key not in self:
                raise self._missing(_key(key))

    def section(self, prefix: str) -> dict[str, Any]:
        """The raw values below ``prefix``, keys relative to it: ``section("db")["host"]``."""
        head = _key(prefix) + "."
        return {k[len(head) :]: v for k, v in sorted(self._values.items()) if k.startswith(head)}

    def as_dict(self, *, nested: bool = False) -> dict[str, Any]:
        """Every raw value, by dotted key, or nested into dicts."""
        flat = dict(sorted(self._values.items()))
        return nest(flat) if nested else flat

    # ------------------------------------------------------------------ validation

    def validate(self) -> list[str]:
        """What does not conform to the declared fields, one message each; empty if all does."""
        problems: list[str] = []
        for key, field in sorted(self._fields.items()):
            if key not in self._values:
                if field.required:
                    problems.append(f"{key}: required but not set")
                continue
            try:
                value = coerce(self._values[key], field.kind)
            except CoercionError as exc:
                problems.append(f"{key} (from {self.origin(key)}): {exc}")
                continue
            if field.choices is not None and value not in field.choices:
                allowed = ", ".join(map(repr, field.choices))
                problems.append(f"{key} (from {self.origin(key)}): {value!r} is not one of {allowed}")
        return problems

    def check(self) -> None:
        """Raise :class:`SettingsError` listing every problem :meth:`validate` finds."""
        problems = self.validate()
        if problems:
            raise SettingsError("invalid settings: " + "; ".join(problems))
