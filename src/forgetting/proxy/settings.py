"""Settings of the deletion proxy (config ``execution.proxy``) and of its deletion engine
(config ``deletion``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from forgetting.deletion.settings import DeletionSettings


@dataclass(frozen=True)
class ProxySettings:
    deletion: DeletionSettings = field(default_factory=DeletionSettings)
    #: extra attempts after a retryable upstream failure (connection error, 429, 502, 503, 504)
    retries: int = 4
    #: wait before the first retry; doubles with each further retry, capped at backoff_max_s
    backoff_s: float = 0.5
    backoff_max_s: float = 8.0
    #: seconds to wait for the upstream's reply to one attempt (a long generation takes a while)
    timeout_s: float = 900.0
    connect_timeout_s: float = 10.0
    #: fsync the call log after every record (survives a machine crash, not only a killed proxy)
    fsync: bool = False
    #: largest request body accepted
    max_request_bytes: int = 64 * 1024 * 1024

    @classmethod
    def from_config(
        cls, proxy_section: Mapping[str, Any] | None = None, deletion_section: Mapping[str, Any] | None = None
    ) -> ProxySettings:
        """From ``study.section("execution").get("proxy")`` and ``study.section("deletion")``."""
        p = dict(proxy_section or {})
        return cls(
            deletion=DeletionSettings.from_config(deletion_section),
            retries=int(p.get("retries", cls.retries)),
            backoff_s=float(p.get("backoff_s", cls.backoff_s)),
            backoff_max_s=float(p.get("backoff_max_s", cls.backoff_max_s)),
            timeout_s=float(p.get("timeout_s", cls.timeout_s)),
            connect_timeout_s=float(p.get("connect_timeout_s", cls.connect_timeout_s)),
            fsync=bool(p.get("fsync", cls.fsync)),
        )

    @classmethod
    def from_study(cls, study: Any) -> ProxySettings:
        """From a :class:`forgetting.config.Study`."""
        return cls.from_config((study.section("execution") or {}).get("proxy"), study.section("deletion"))

    def as_dict(self) -> dict[str, Any]:
        return {
            "deletion": self.deletion.as_dict(),
            "retries": self.retries,
            "backoff_s": self.backoff_s,
            "backoff_max_s": self.backoff_max_s,
            "timeout_s": self.timeout_s,
            "connect_timeout_s": self.connect_timeout_s,
            "fsync": self.fsync,
        }
