"""``model.backend: endpoint`` for a batch: nothing started, the endpoint checked.

:meth:`EndpointBackend.serving` — the ``endpoint`` entry of
:data:`forgetting.run.model_server.BACKENDS`, a :class:`~forgetting.run.model_server.ServingBackend` —
reads the API key from the variable
``model.endpoint.api_key_env`` names, finds the endpoint (``base_url``, or the address file a
``forgetting serve`` job publishes, waited for), checks it once (:func:`.health.check_endpoint`)
and yields it to the batch (:class:`ServedEndpoint`) with the :class:`~forgetting.run.proxy.upstream.Access` its runs'
proxies use: the key, and the limits the runs share (``max_concurrent_requests`` slots and the
pause after a 429, in the batch's scratch directory). A failed check raises before any run is
started. While the runs go on, :meth:`ServedEndpoint.trouble` checks again when the batch asks (every 30 s,
and at once after a run met an infrastructure failure).

What the runs are labelled (``run.json``'s ``model_backend``): ``endpoint``; or ``scripted``
when the endpoint lists the served model as owned by the scripted stand-in
(:data:`forgetting.demo.scripted.model.FINGERPRINT`) — the numbers then describe the stand-in,
and the tables say so, whichever way it was reached. ``versions.model`` adds the endpoint's
base URL and the model's owner.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TextIO

from forgetting.demo.scripted.model import FINGERPRINT
from forgetting.endpoint.address import ServerAddress, read_address, wait_for_address
from forgetting.endpoint.health import EndpointError, ModelEntry, check_endpoint
from forgetting.foundation.errors import UserError
from forgetting.run.model_server import served_name_of
from forgetting.run.proxy.shared_limits import SharedLimits
from forgetting.run.proxy.upstream import Access, Upstream
from forgetting.study.endpoint import EndpointSettings
from forgetting.study.proxy import ProxySettings

#: the health check's own request timeout (a model list comes back in well under a second)
HEALTH_TIMEOUT_S = 30.0
#: … and its retry waits together at most
HEALTH_MAX_WAIT_S = 120.0
#: how often a batch reads its address file again (it lives on a shared file system)
ADDRESS_EVERY_S = 5.0


class EndpointBackend:
    """``model.backend: endpoint``: starts nothing, checks the endpoint (see the module docstring)."""

    @contextlib.contextmanager
    def serving(self, model: Mapping[str, Any], *, log_path: Path, seed: int = 0, timeout_s: float | None = None,
                scratch: Path | None = None, proxy_settings: ProxySettings,
                say: Any = None) -> Iterator[ServedEndpoint]:
        """Find the endpoint, check it, yield it; a failed check raises (one line). ``model``: a
        loaded study's model section (:meth:`forgetting.study.sections.ModelSettings.as_dict`)."""
        t0 = time.monotonic()
        settings = EndpointSettings.from_filled(model["endpoint"])
        policy = proxy_settings
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "a", encoding="utf-8") as log:
            key = _logged(log, settings.api_key)
            address = None
            if settings.address_file is not None:
                wait = settings.address_wait_s if timeout_s is None else timeout_s

                def waiting(message: str) -> None:
                    _line(log, message)
                    if say is not None:
                        say(message)

                address = _logged(log, lambda: wait_for_address(settings.address_file, wait, say=waiting))
                url = address.base_url
            else:
                assert settings.base_url is not None
                url = settings.base_url
            shared = SharedLimits(scratch / "endpoint-limits", settings.max_concurrent_requests) if scratch else None
            access = Access(api_key=key, key_name=settings.api_key_env, shared=shared, label="model endpoint")
            health = Upstream(
                url, retries=policy.retries, backoff_s=policy.backoff_s, backoff_max_s=policy.backoff_max_s,
                jitter=policy.jitter, max_wait_s=min(policy.max_wait_s, HEALTH_MAX_WAIT_S),
                timeout_s=min(policy.timeout_s, HEALTH_TIMEOUT_S), connect_timeout_s=policy.connect_timeout_s,
                access=access, jitter_seed=f"health/{seed}",
            )
            served_name = served_name_of(model)
            where = f" — {address.where(settings.address_file)}" if address and settings.address_file else ""
            _line(log, f"checking the model endpoint {health.url}{where}: GET /v1/models, model {served_name!r}, "
                       f"key {'from $' + settings.api_key_env if settings.api_key_env else 'none'}")
            try:
                try:
                    entry = check_endpoint(health, served_name)
                except EndpointError as exc:
                    raise EndpointError(f"{exc}{where}") from None
                _line(log, f"ok: {entry.id!r} owned by {entry.owned_by}")
            except UserError as exc:
                _line(log, f"error: {exc}")
                health.close()
                raise
        backend = ServedEndpoint(url, served_name, access, log_path, entry, round(time.monotonic() - t0, 3),
                      address, settings.address_file, health)
        try:
            yield backend
        finally:
            health.close()


@dataclass
class ServedEndpoint:
    """An endpoint a batch's runs talk to, checked (see the module docstring)."""

    base_url: str
    served_name: str
    access: Access
    log_path: Path
    entry: ModelEntry
    startup_s: float
    address: ServerAddress | None = None
    address_file: Path | None = None
    _health: Upstream | None = field(default=None, repr=False)
    _address_read: float = field(default=0.0, repr=False)
    backend_name: ClassVar[str] = "endpoint"

    # -- what the batch asks -------------------------------------------------------------
    @property
    def stand_in(self) -> bool:
        """The endpoint serves the scripted stand-in (its model list says so)."""
        return self.entry.owned_by == FINGERPRINT

    @property
    def model_backend(self) -> str:
        return "scripted" if self.stand_in else self.backend_name

    def describe(self) -> dict[str, Any]:
        return {"endpoint": self._health.url if self._health else self.base_url, "served_by": self.entry.owned_by}

    def ready_line(self) -> str:
        url = self._health.url if self._health else self.base_url
        line = f"model endpoint {url} ready in {self.startup_s:.1f} s: {self.entry.id!r} owned by {self.entry.owned_by}"
        if self.stand_in:
            line += " (the scripted stand-in: the runs are labelled model_backend scripted)"
        return line

    def trouble(self, check_health: bool) -> str | None:
        """Why the endpoint can no longer serve: its server job withdrew its address, or
        (``check_health``) the check fails again; None while it can."""
        due = time.monotonic() - self._address_read >= ADDRESS_EVERY_S
        if self.address_file is not None and (due or check_health):
            self._address_read = time.monotonic()
            try:
                current = read_address(self.address_file)
            except UserError:
                current = None
            if current != self.address:
                return f"the model server job withdrew or replaced its address in {self.address_file}"
        if not check_health or self._health is None:
            return None
        try:
            check_endpoint(self._health, self.served_name)
        except EndpointError as exc:
            return str(exc)
        return None


def _line(log: TextIO, message: str) -> None:
    log.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {' '.join(message.split())}\n")
    log.flush()


def _logged(log: TextIO, step: Any) -> Any:
    """``step()``, its one-line error (if any) also in the endpoint's log."""
    try:
        return step()
    except UserError as exc:
        _line(log, f"error: {exc}")
        raise
