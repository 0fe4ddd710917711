"""Settings of the deletion proxy (config ``execution.proxy``) and of its deletion engine
(config ``deletion``); their defaults are the schema's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from forgetting.deletion.settings import DeletionSettings
from forgetting.foundation import config_schema


@dataclass(frozen=True)
class ProxySettings(config_schema.Section):
    """The keys of ``execution.proxy`` (config/README.md), and the ``deletion`` section."""

    deletion: DeletionSettings
    #: extra attempts after a retryable upstream failure (connection error, 429, 502, 503, 504);
    #: the policy: :mod:`forgetting.run.proxy.upstream`
    retries: int
    #: wait before the first retry; doubles with each further retry, capped at backoff_max_s
    backoff_s: float
    backoff_max_s: float
    #: share of each backoff wait taken off at random (deterministic: the run's seed)
    jitter: float
    #: all of one request's waits between attempts together at most (Retry-After included)
    max_wait_s: float
    #: seconds to wait for the upstream's reply to one attempt (a long generation takes a while)
    timeout_s: float
    connect_timeout_s: float
    #: fsync the call log after every record (survives a machine crash, not only a killed proxy)
    fsync: bool
    #: seconds a client connection may sit idle (between requests, or stalled inside one)
    #: before the proxy closes it and frees its thread
    idle_timeout_s: float
    #: largest request body accepted (not configurable)
    max_request_bytes: ClassVar[int] = 64 * 1024 * 1024
    PATH: ClassVar[str] = "execution.proxy"

    @classmethod
    def from_filled(cls, values: Mapping[str, Any], *, deletion: DeletionSettings) -> ProxySettings:
        """From a checked ``execution.proxy`` section and the study's deletion settings."""
        p = values
        return cls(
            deletion=deletion, retries=int(p["retries"]),
            backoff_s=float(p["backoff_s"]), backoff_max_s=float(p["backoff_max_s"]), jitter=float(p["jitter"]),
            max_wait_s=float(p["max_wait_s"]), timeout_s=float(p["timeout_s"]),
            connect_timeout_s=float(p["connect_timeout_s"]), fsync=bool(p["fsync"]),
            idle_timeout_s=float(p["idle_timeout_s"]),
        )

    @classmethod
    def from_parts(
        cls, proxy: Mapping[str, Any] | None = None, deletion: Mapping[str, Any] | None = None
    ) -> ProxySettings:
        """From parts of ``execution.proxy`` and ``deletion`` handed in apart from a study (a
        test's; each checked, its defaults filled); a loaded study holds its own (``study.proxy``)."""
        return cls.from_section(proxy, deletion=DeletionSettings.from_section(deletion))

    def as_dict(self) -> dict[str, Any]:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return {**values, "deletion": self.deletion.as_dict()}

    def upstream_options(self) -> dict[str, Any]:
        """How the proxy talks to the model server: :class:`~forgetting.run.proxy.upstream.Upstream`'s options."""
        keys = ("retries", "backoff_s", "backoff_max_s", "jitter", "max_wait_s", "timeout_s", "connect_timeout_s")
        return {k: getattr(self, k) for k in keys}
