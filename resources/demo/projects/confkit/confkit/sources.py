"""Where settings come from: mappings, ``.env`` files, INI files and the environment.

A source's :meth:`~Source.load` returns a flat dict from dotted, lower-case keys
(``"db.host"``) to values. Each call reads the source afresh: :class:`confkit.Settings`
calls it when it is created and on every ``reload()``.

Nested names are written with a double underscore in ``.env`` files and environment
variables (``DB__HOST`` is ``db.host``), with sections in INI files (``[db]`` then
``host = ...``), and with nested dicts in mappings.
"""

from __future__ import annotations

import abc
import configparser
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "DotEnvError",
    "DotEnvSource",
    "EnvSource",
    "FileSource",
    "IniSource",
    "MappingSource",
    "Source",
    "SourceError",
    "flatten",
    "normalize_key",
    "parse_dotenv",
]

_DOTENV_LINE = re.compile(r"(?:export\s+)?(?P<key>[A-Za-z_][A-Za-z0-9_.]*)\s*=\s*(?P<value>.*)")
_INLINE_COMMENT = re.compile(r"\s+#.*$")
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "$": "$"}


class SourceError(ValueError):
    """A source that cannot be read."""


class DotEnvError(SourceError):
    """A malformed line in a ``.env`` file; the message names the file and line."""

    def __init__(self, path: str, line: int, message: str) -> None:
        super().__init__(f"{path}:{line}: {message}")
        self.path = path
        self.line = line


def normalize_key(name: str, separator: str = "__") -> str:
    """``DB__HOST`` -> ``db.host``: lower case, ``separator`` becomes a dot."""
    return ".".join(part for part in name.strip().lower().split(separator))


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings to dotted keys: ``{"db": {"host": "x"}}`` -> ``{"db.host": "x"}``."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{str(key).lower()}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


class Source(abc.ABC):
    """Base class: a named provider of flat settings."""

    name: str = "source"

    @abc.abstractmethod
    def load(self) -> dict[str, Any]:
        """The source's settings as a flat dict of dotted keys, read afresh."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class MappingSource(Source):
    """Settings from a (possibly nested) mapping, read live on every load."""

    def __init__(self, data: Mapping[str, Any], *, name: str = "mapping") -> None:
        self.data = data
        self.name = name

    def load(self) -> dict[str, Any]:
        return flatten(self.data)


def _closing_quote(text: str, quote: str) -> int:
    """Index of the quote closing ``text[0]``, honouring backslash escapes in ``"..."``."""
    index = 1
    while index < len(text):
        char = text[index]
        if char == "\\" and quote == '"':
            index += 2
            continue
        if char == quote:
            return index
        index += 1
    return -1


def _unescape(body: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), "\\" + m.group(1)), body)


def _parse_value(raw: str, path: str, line: int) -> str:
    """A value: ``'single'`` (literal), ``"double"`` (with escapes) or bare (comment stripped)."""
    raw = raw.strip()
    if raw[:1] in ("'", '"'):
        quote = raw[0]
        end = _closing_quote(raw, quote)
        if end < 0:
            raise DotEnvError(path, line, "unterminated quoted value")
        rest = raw[end + 1 :].strip()
        if rest and not rest.startswith("#"):
            raise DotEnvError(path, line, f"unexpected text after the closing quote: {rest!r}")
        body = raw[1:end]
        return _unescape(body) if quote == '"' else body
    return _INLINE_COMMENT.sub("", raw)


def parse_dotenv(text: str, *, path: str = "<string>") -> dict[str, str]:
    """The ``KEY=value`` lines of a ``.env`` file, keys normalized (``DB__HOST`` -> ``db.host``).

    Blank lines and lines starting with ``#`` are skipped; an ``export`` prefix is allowed;
    a ``#`` after whitespace starts a comment unless it is inside quotes. Later lines
    override earlier ones.

    >>> parse_dotenv('export DB__HOST=localhost  # dev\\nTOKEN="a#b"')
    {'db.host': 'localhost', 'token': 'a#b'}
    """
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _DOTENV_LINE.fullmatch(stripped)
        if match is None:
            raise DotEnvError(path, number, f"expected KEY=value, got {stripped!r}")
        values[normalize_key(match["key"])] = _parse_value(match["value"], path, number)
    return values


class FileSource(Source):
    """Base class of the sources read from a file.

    A missing file is an error unless ``required=False``, in which case the source gives
    no settings (so an optional local override file may come and go).
    """

    def __init__(self, path: str | os.PathLike[str], *, required: bool = True) -> None:
        self.path = Path(path)
        self.required = required
        self.name = str(self.path)

    def read_text(self) -> str | None:
        """The file's text, or ``None`` when an optional file is missing."""
        try:
            return self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            if self.required:
                raise SourceError(f"{self.path}: settings file not found") from None
            return None


class DotEnvSource(FileSource):
    """Settings from a ``.env`` file (see :func:`parse_dotenv`), read again on every load."""

    def load(self) -> dict[str, Any]:
        text = self.read_text()
        return {} if text is None else parse_dotenv(text, path=self.name)


class IniSource(FileSource):
    """Settings from an INI file: ``[section]`` then ``key = value`` is ``section.key``.

    Keys of the ``[DEFAULT]`` section are top-level (``debug``, not ``default.debug``) and
    are not copied into the other sections.
    """

    def load(self) -> dict[str, Any]:
        text = self.read_text()
        if text is None:
            return {}
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read_string(text, source=self.name)
        except configparser.Error as exc:
            raise SourceError(f"{self.path}: {exc.message}") from None
        defaults = parser.defaults()
        out = {key.lower(): value for key, value in defaults.items()}
        for section in parser.sections():
            for key, value in parser.items(section, raw=True):
                if key in defaults and defaults[key] == value:
                    continue
                out[f"{section.lower()}.{key.lower()}"] = value
        return out


class EnvSource(Source):
    """Settings from environment variables named ``<PREFIX><separator><KEY>``.

    With the default separator, ``APP__DB__HOST`` is ``db.host`` for ``prefix="APP"``.
    Only variables that start with the prefix *and* the separator are read, so
    ``APPLICATION_ID`` is not a setting of ``APP``. ``environ`` defaults to the live
    :data:`os.environ`.
    """

    def __init__(
        self,
        prefix: str,
        *,
        separator: str = "__",
        environ: Mapping[str, str] | None = None,
    ) -> None:
        if not prefix or prefix.endswith("_"):
            raise ValueError(f"prefix must be non-empty and not end with '_': {prefix!r}")
        self.prefix = prefix
        self.separator = separator
        self.environ = environ
        self.name = f"environment ({prefix}{separator}*)"

    def load(self) -> dict[str, Any]:
        environ = os.environ if self.environ is None else self.environ
        head = (self.prefix + self.separator).upper()
        out: dict[str, Any] = {}
        for name in sorted(environ):
            if not name.upper().startswith(head):
                continue
            rest = name[len(head) :]
            if not rest or any(not part for part in rest.split(self.separator)):
                continue
            out[normalize_key(rest, self.separator)] = environ[name]
        return out
