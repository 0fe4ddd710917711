"""Typed access to a parsed JSON document, for the readers of run outputs.

Every reader of :mod:`forgetting.records` turns a JSON object into a typed record through
:class:`Fields`: each field is asked for with the type it must have, and a field that is
missing or of another type is one :class:`~forgetting.foundation.errors.RunOutputError` line naming the
file and the field (``x.traj.json: messages[3].tool_calls is a string, expected a list or
null``). Inner code then trusts the record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from forgetting.foundation.errors import RunOutputError


def kind_of(value: Any) -> str:
    """What a JSON value is, in words."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class Fields:
    """The fields of one JSON object at ``where`` (``""`` for the document itself) of ``source``."""

    def __init__(self, data: Mapping[str, Any], source: Path, where: str = "", hint: str = "") -> None:
        self.data = data
        self.source = source
        self.where = where
        self.hint = hint  # appended to every error: what to do about it

    @classmethod
    def of(cls, value: Any, source: Path, where: str = "", hint: str = "") -> Fields:
        """``value`` as an object (error naming ``where`` if it is not one)."""
        if not isinstance(value, Mapping):
            raise cls({}, source, "", hint).error(where or "the document", value, "an object")
        return cls(value, source, where, hint)

    def name(self, key: str | int) -> str:
        if isinstance(key, int):
            return f"{self.where}[{key}]"
        return f"{self.where}.{key}" if self.where else key

    def error(self, name: str, value: Any, expected: str) -> RunOutputError:
        tail = f"; {self.hint}" if self.hint else ""
        return RunOutputError(f"{self.source}: {name} is {kind_of(value)}, expected {expected}{tail}")

    def fail(self, message: str) -> RunOutputError:
        """A one-line error about this object: ``{source}: {where}: {message}``."""
        tail = f"; {self.hint}" if self.hint else ""
        head = f"{self.where}: " if self.where else ""
        return RunOutputError(f"{self.source}: {head}{message}{tail}")

    def has(self, key: str) -> bool:
        return key in self.data

    def _get(self, key: str, expected: str, ok: Callable[[Any], bool], required: bool, null: bool) -> Any:
        if key not in self.data:
            if required:
                tail = f"; {self.hint}" if self.hint else ""
                raise RunOutputError(f"{self.source}: {self.name(key)} is missing, expected {expected}{tail}")
            return None
        value = self.data[key]
        if value is None and null:
            return None
        if not ok(value):
            raise self.error(self.name(key), value, expected + (" or null" if null else ""))
        return value

    def string(self, key: str, *, required: bool = False, null: bool = True) -> str | None:
        return self._get(key, "a string", lambda v: isinstance(v, str), required, null)  # type: ignore[no-any-return]

    def integer(self, key: str, *, required: bool = False, null: bool = True) -> int | None:
        return self._get(key, "an integer", is_int, required, null)  # type: ignore[no-any-return]

    def number(self, key: str, *, required: bool = False, null: bool = True) -> int | float | None:
        return self._get(key, "a number", is_number, required, null)  # type: ignore[no-any-return]

    def boolean(self, key: str, *, required: bool = False, null: bool = True) -> bool | None:
        return self._get(key, "true or false", lambda v: isinstance(v, bool), required, null)  # type: ignore[no-any-return]

    def mapping(self, key: str, *, required: bool = False, null: bool = True) -> Mapping[str, Any] | None:
        """The raw object at ``key`` (its own fields unchecked)."""
        return self._get(key, "an object", lambda v: isinstance(v, Mapping), required, null)  # type: ignore[no-any-return]

    def obj(self, key: str, *, required: bool = False, null: bool = True) -> Fields | None:
        value = self.mapping(key, required=required, null=null)
        return None if value is None else Fields(value, self.source, self.name(key), self.hint)

    def items(self, key: str, *, required: bool = False, null: bool = True) -> list[Any] | None:
        """The raw list at ``key``."""
        return self._get(key, "a list", lambda v: isinstance(v, list), required, null)  # type: ignore[no-any-return]

    def objects(self, key: str, *, required: bool = False, null: bool = True) -> list[Fields]:
        """The list of objects at ``key`` (``[]`` when absent or null)."""
        values = self.items(key, required=required, null=null) or []
        where = self.name(key)
        return [Fields.of(v, self.source, f"{where}[{i}]", self.hint) for i, v in enumerate(values)]

    def unknown(self, known: frozenset[str] | set[str]) -> None:
        """An error for the first field not in ``known``."""
        extra = sorted(set(self.data) - set(known))
        if extra:
            raise self.fail(f"unknown field {extra[0]!r}")
