"""``model.endpoint`` (config/README.md), checked and resolved once.

Where the endpoint is — ``base_url``, or ``address_file`` (what ``forgetting serve`` wrote) —
how to authenticate — ``api_key_env``, the *name* of an environment variable, read only when a
batch starts (:meth:`EndpointSettings.api_key`) — and how hard the batch's runs may press it —
``max_concurrent_requests``. A bad value is one line naming the key, when the study is loaded.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

from forgetting.foundation import config_schema
from forgetting.foundation.errors import ConfigError


def without_credentials(url: str) -> str:
    """``url`` as a message may show it: whatever stands before an ``@`` in its authority (a
    user name, a password, a key) replaced by ``…``."""
    return re.sub(r"^([^:/?#]*:)?//[^/?#]*@", lambda m: f"{m.group(1) or ''}//…@", url)


def check_base_url(url: str, key: str = "model.endpoint.base_url") -> str:
    """An http(s) URL with a host and no credentials, query, space or control character in it;
    returned unchanged. No message repeats the credentials (``key``: the option or field named
    in the message)."""
    odd = next((c for c in url if c.isspace() or not c.isprintable()), None)
    if odd is not None:
        where = "at its end" if url.rstrip() != url and odd.isspace() else f"at offset {url.index(odd)}"
        raise ConfigError(f"{key}: {without_credentials(url)!r} holds a space or control character ({odd!r} {where}); "
                          "give the URL alone, such as https://api.example.com/v1")
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # "Invalid IPv6 URL": a bracket not closed
        raise ConfigError(f"{key}: {without_credentials(url)!r} is not a URL ({exc}); "
                          "an IPv6 host is written in brackets, such as http://[::1]:8000/v1") from None
    if "@" in parts.netloc:
        raise ConfigError(f"{key}: the URL holds credentials; put the API key in an environment variable "
                          "and name it in model.endpoint.api_key_env")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{key}: {without_credentials(url)!r} is not an http(s) URL such as https://api.example.com/v1")
    if parts.username or parts.password:
        raise ConfigError(f"{key}: the URL holds credentials; put the API key in an environment variable "
                          "and name it in model.endpoint.api_key_env")
    if parts.query or parts.fragment:
        raise ConfigError(f"{key}: {parts.scheme}://{parts.hostname}…: the URL holds a query or fragment; "
                          "give the API root only (…/v1)")
    try:
        parts.port  # noqa: B018 (a bad port raises here)
    except ValueError:
        raise ConfigError(f"{key}: {parts.scheme}://{parts.hostname}…: a bad port") from None
    return url


@dataclass(frozen=True)
class EndpointSettings(config_schema.Section):
    """The keys of ``model.endpoint``."""

    #: the API root (None: read from ``address_file``)
    base_url: str | None
    #: the file a ``forgetting serve`` job publishes its address in (None: ``base_url``)
    address_file: Path | None
    #: how long a batch waits for ``address_file`` to appear
    address_wait_s: float
    #: the name of the environment variable holding the API key (None: no key)
    api_key_env: str | None
    #: requests in flight at once across a batch's runs (None: one per run in flight)
    max_concurrent_requests: int | None
    PATH: ClassVar[str] = "model.endpoint"

    @classmethod
    def from_filled(cls, values: Mapping[str, Any], *, root: Path | None = None) -> EndpointSettings:
        """From a checked ``model.endpoint`` section of a study whose ``model.backend`` is
        ``endpoint``; relative paths against ``root`` (the study's root; None: as given)."""
        e = values
        url, address = e.get("base_url"), e.get("address_file")  # optional: one of the two
        if bool(url) == bool(address):
            raise ConfigError("model.endpoint: give base_url (a running server's API root) or address_file "
                              "(what `forgetting serve` publishes), exactly one of them")
        if url:
            check_base_url(str(url))
        path: Path | None = None
        if address:
            path = config_schema.config_path(address, root)
        name = e.get("api_key_env")  # optional: no key
        if name is not None:
            check_key_name(str(name))
        limit = e.get("max_concurrent_requests")  # optional: no limit beyond the runs in flight
        return cls(
            base_url=str(url) if url else None,
            address_file=path,
            address_wait_s=float(e["address_wait_s"]),
            api_key_env=str(e["api_key_env"]) if e.get("api_key_env") else None,
            max_concurrent_requests=int(limit) if limit is not None else None,
        )

    def api_key(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The API key from the environment (None when no variable is named); see :func:`read_api_key`."""
        if self.api_key_env is None:
            return None
        return read_api_key(self.api_key_env, environ)


def check_key_name(name: str, what: str = "model.endpoint.api_key_env") -> str:
    """An environment variable's name; anything else is one line that never echoes the value
    (it may be the key itself, put in the wrong place)."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ConfigError(f"{what}: not an environment variable name (letters, digits, _); "
                          "give the NAME of the variable that holds the key, never the key")
    return name


def read_api_key(name: str, environ: Mapping[str, str] | None = None, what: str = "model.endpoint.api_key_env") -> str:
    """The key in the environment variable ``name``. An unset or empty variable, or a value with
    whitespace inside, is one line naming the variable — never its value."""
    env = os.environ if environ is None else environ
    value = env.get(check_key_name(name, what), "").strip()
    if not value:
        raise ConfigError(f"{what}: the environment variable {name} is not set where the batch runs; "
                          f"export {name}=<your API key> first")
    if any(ch.isspace() for ch in value) or not value.isprintable():
        raise ConfigError(f"{what}: the value of {name} holds whitespace or control characters; "
                          "it must be the key alone")
    if not value.isascii():  # it goes out in an HTTP header (latin-1 at most; keys are ASCII)
        raise ConfigError(f"{what}: the value of {name} holds a character outside ASCII; an API key is ASCII "
                          "(it travels in an HTTP header): export the key alone, as the provider gave it")
    return value
