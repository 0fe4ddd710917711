"""Pricing profiles: price sheets as data (``resources/pricing/NAME.yaml``).

A profile is prices per million tokens plus the rules of a provider's prompt cache. Every
rule is a parameter, so a new profile is a new YAML file, never new code::

    description: free text (optional)
    currency: USD                 # optional, default USD
    per_million_tokens:           # required
      input: 0.45                 # required: uncached prompt tokens
      cached_input: 0.09          # required: prompt tokens served from the cache
      output: 2.25                # required: generated tokens
      cache_write: 0.45           # optional, default = input: prompt tokens written to the cache
    cache:                        # optional; the defaults give the paper's lower bound
      min_prefix: 0               # no hit shorter than this many tokens
      increment: 1                # hits grow in steps of this many tokens above min_prefix;
                                  # `server`: the KV block the call log read from the server
      fallback_increment: 16      # with `increment: server`, where the source recorded none
      recompute_last_token: false # a full-prompt hit still recomputes the last token (vLLM)
      ttl_s: null                 # an entry expires this many seconds after its last use
      capacity_tokens: null       # LRU capacity of the cache in tokens

The cache model these parameters drive is described in :mod:`forgetting.cost.cache_model`
and in ``docs/cost.md``. A problem with a file is one :class:`ResourceError` line naming
the file and the field.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from forgetting.foundation import config_schema
from forgetting.foundation.config_schema import PROJECT_ROOT
from forgetting.foundation.errors import ConfigError, ResourceError
from forgetting.foundation.inputs import read_yaml

#: where the price sheets of a checkout live
#: ``pricing.dir``'s default, in this checkout
DEFAULT_PRICING_DIR = PROJECT_ROOT / config_schema.defaults("pricing")["dir"]

_TOP_KEYS = ("description", "currency", "per_million_tokens", "cache")
_PRICE_KEYS = ("input", "cached_input", "output", "cache_write")
_REQUIRED_PRICES = ("input", "cached_input", "output")
_CACHE_KEYS = ("min_prefix", "increment", "fallback_increment", "recompute_last_token", "ttl_s", "capacity_tokens")


@dataclass(frozen=True)
class PricingProfile:
    """One price sheet; prices in currency per million tokens."""

    name: str
    input: float
    cached_input: float
    output: float
    cache_write: float
    min_prefix: int = 0
    increment: int = 1
    recompute_last_token: bool = False
    ttl_s: float | None = None
    capacity_tokens: int | None = None
    currency: str = "USD"
    description: str = ""
    source: str = ""
    #: ``increment: server``: the step is the server's KV block as the call log recorded it
    #: (:meth:`for_run`); ``increment`` holds the fallback for a source that recorded none
    increment_from_server: bool = False

    def for_run(self, block_size: int | None) -> PricingProfile:
        """This profile for a run whose server reported ``block_size`` (None: not reported)."""
        if not self.increment_from_server or block_size is None or block_size == self.increment:
            return self
        return replace(self, increment=block_size)

    @property
    def needs_cache_state(self) -> bool:
        """Whether hits depend on more than the longest common prefix (expiry or eviction)."""
        return self.ttl_s is not None or self.capacity_tokens is not None

    def round_hit(self, tokens: int) -> int:
        """The longest cacheable prefix length ≤ ``tokens``: 0 below ``min_prefix``, then
        ``min_prefix + k·increment`` (the cache's lattice of prefix lengths)."""
        n0 = self.min_prefix if self.min_prefix > 0 else self.increment
        if tokens < n0:
            return 0
        return n0 + (tokens - n0) // self.increment * self.increment


def _fail(path: Path, message: str) -> ResourceError:
    return ResourceError(f"{path}: {message}")


def _check_keys(path: Path, section: Mapping[str, Any], allowed: Sequence[str], where: str) -> None:
    for key in section:
        if key not in allowed:
            name = f"{where}.{key}" if where else str(key)
            raise _fail(path, f"unknown key {name!r}; allowed keys: {', '.join(allowed)}")


def _number(path: Path, value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _fail(path, f"{field} must be a number (got {value!r})")
    return float(value)


def _price(path: Path, prices: Mapping[str, Any], key: str) -> float:
    field = f"per_million_tokens.{key}"
    value = _number(path, prices[key], field)
    if value < 0:
        raise _fail(path, f"{field} must be ≥ 0 (got {prices[key]!r})")
    return value


def _int(path: Path, value: Any, field: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(path, f"{field} must be an integer (got {value!r})")
    if value < minimum:
        raise _fail(path, f"{field} must be ≥ {minimum} (got {value})")
    return value


def parse_profile(data: Any, path: Path, name: str | None = None) -> PricingProfile:
    """Check a parsed price sheet and build its profile (name: the file stem)."""
    if not isinstance(data, Mapping):
        raise _fail(path, "a price sheet must be a mapping with per_million_tokens (and optionally cache)")
    _check_keys(path, data, _TOP_KEYS, "")
    if "per_million_tokens" not in data:
        raise _fail(path, "missing field per_million_tokens")
    prices = data["per_million_tokens"]
    if not isinstance(prices, Mapping):
        raise _fail(
            path, "per_million_tokens must be a mapping of input, cached_input, output[, cache_write]"
        )
    _check_keys(path, prices, _PRICE_KEYS, "per_million_tokens")
    for key in _REQUIRED_PRICES:
        if key not in prices:
            raise _fail(path, f"missing field per_million_tokens.{key}")
    p_in = _price(path, prices, "input")
    p_write = _price(path, prices, "cache_write") if "cache_write" in prices else p_in
    cache = data.get("cache") or {}
    if not isinstance(cache, Mapping):
        raise _fail(path, "cache must be a mapping")
    _check_keys(path, cache, _CACHE_KEYS, "cache")
    min_prefix = _int(path, cache.get("min_prefix", 0), "cache.min_prefix", 0)
    from_server = cache.get("increment") == "server"
    if from_server:
        increment = _int(path, cache.get("fallback_increment", 16), "cache.fallback_increment", 1)
    else:
        if "fallback_increment" in cache:
            raise _fail(path, "cache.fallback_increment is only read with increment: server")
        increment = _int(path, cache.get("increment", 1), "cache.increment", 1)
    recompute = cache.get("recompute_last_token", False)
    if not isinstance(recompute, bool):
        raise _fail(path, f"cache.recompute_last_token must be true or false (got {recompute!r})")
    ttl = cache.get("ttl_s")
    if ttl is not None:
        ttl = _number(path, ttl, "cache.ttl_s")
        if ttl <= 0:
            raise _fail(path, f"cache.ttl_s must be > 0 or null (got {cache['ttl_s']!r})")
    capacity = cache.get("capacity_tokens")
    if capacity is not None:
        capacity = _int(path, capacity, "cache.capacity_tokens", 1)
    currency = data.get("currency", "USD")
    if not isinstance(currency, str) or not currency:
        raise _fail(path, f"currency must be a non-empty string (got {currency!r})")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise _fail(path, "description must be a string")
    return PricingProfile(
        name=name or path.stem, input=p_in, cached_input=_price(path, prices, "cached_input"),
        output=_price(path, prices, "output"), cache_write=p_write, min_prefix=min_prefix, increment=increment,
        recompute_last_token=recompute, ttl_s=ttl, capacity_tokens=capacity, currency=currency,
        description=description.strip(), source=str(path), increment_from_server=from_server,
    )


def load_profile(path: str | os.PathLike[str]) -> PricingProfile:
    p = Path(path)
    if not p.is_file() and not p.is_dir():
        raise ResourceError(f"{p}: price sheet not found")
    return parse_profile(read_yaml(p, what="price sheet", error=ResourceError), p)


def available_profiles(directory: str | os.PathLike[str] = DEFAULT_PRICING_DIR) -> list[str]:
    d = Path(directory)
    return sorted(p.stem for p in d.glob("*.yaml")) if d.is_dir() else []


def load_profiles(directory: str | os.PathLike[str] | None, names: Sequence[str]) -> list[PricingProfile]:
    """Load the named profiles from ``directory`` (``NAME.yaml``); a name that is a path to a
    ``.yaml`` file is loaded from there. Duplicates are an error."""
    d = Path(directory) if directory is not None else DEFAULT_PRICING_DIR
    if not names:
        raise ResourceError(f"{d}: no pricing profile named; available: {', '.join(available_profiles(d))}")
    out: list[PricingProfile] = []
    seen: set[str] = set()
    for name in names:
        candidate = Path(name)
        if candidate.suffix in (".yaml", ".yml") and candidate.is_file():
            profile = load_profile(candidate)
        else:
            path = d / f"{name}.yaml"
            if not path.is_file():
                avail = available_profiles(d)
                raise ResourceError(
                    f"{path}: no pricing profile {name!r}; available in {d}: {', '.join(avail) or '(none)'}"
                )
            profile = load_profile(path)
        if profile.name in seen:
            raise ResourceError(f"{profile.source}: pricing profile {profile.name!r} named twice")
        seen.add(profile.name)
        out.append(profile)
    return out


def profile_names(section: Mapping[str, Any]) -> list[str]:
    """The profiles a checked ``pricing`` section computes, in the cost stage's order:
    ``pricing.profiles``, the primary first where the list leaves it out."""
    names = [str(n) for n in section["profiles"]]
    primary = str(section["primary"])
    return names if primary in names else [primary, *names]


def profiles_from_config(
    section: Mapping[str, Any], root: str | os.PathLike[str] | None = None
) -> tuple[list[PricingProfile], str]:
    """The profiles and the primary name of a study config's checked ``pricing`` section
    (``dir`` resolved against ``root``, default the project root); the primary is computed even
    when ``profiles`` omits it. A loaded study holds them: ``study.pricing``."""
    directory = Path(section["dir"])
    if not directory.is_absolute():
        directory = (Path(root) if root is not None else PROJECT_ROOT) / directory
    primary, names = str(section["primary"]), profile_names(section)
    if not directory.is_dir():
        raise ConfigError(f"pricing.dir: {directory} is not a directory of price sheets")
    return load_profiles(directory, names), primary
