"""The address file: where a model server job (``forgetting serve``) can be reached.

The server job writes it — atomically, once the server's ``/health`` answers — and removes it
when it stops; a batch job whose ``model.endpoint.address_file`` names it waits for it
(``model.endpoint.address_wait_s`` at most), then talks to ``base_url``. One JSON object::

    {"base_url": "http://gpu017:8000/v1", "host": "gpu017", "port": 8000, "model": "qwen3-coder",
     "backend": "vllm", "started": "2026-04-02T10:11:12Z", "job_id": "123456", "pid": 4242}

``job_id`` is the Slurm job's (``SLURM_JOB_ID``; null outside Slurm), so an error can say which
job to look at (``squeue -j JOB``).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from forgetting.foundation.atomic import write_json
from forgetting.foundation.errors import ConfigError, UserError
from forgetting.study.endpoint import check_base_url


class AddressError(UserError):
    """The address file is missing past its wait, or unreadable (one line naming it)."""


@dataclass(frozen=True)
class ServerAddress:
    base_url: str
    host: str
    port: int
    model: str
    backend: str
    started: str  # UTC, ISO 8601
    job_id: str | None
    pid: int

    def where(self, path: Path) -> str:
        """Which job published it, for messages."""
        job = f"job {self.job_id}" if self.job_id else f"pid {self.pid}"
        return f"{self.base_url} (published in {path} by {job} at {self.started})"


_FIELDS: dict[str, type | tuple[type, ...]] = {
    "base_url": str, "host": str, "port": int, "model": str, "backend": str, "started": str,
    "job_id": (str, type(None)), "pid": int,
}


def publish_address(path: str | os.PathLike[str], address: ServerAddress) -> None:
    """Write the address file atomically (a reader never sees half of it)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_json(path, asdict(address))


def withdraw_address(path: str | os.PathLike[str], address: ServerAddress) -> None:
    """Remove the address file if it is still this server's (a newer server's stays)."""
    with contextlib.suppress(OSError, AddressError):
        if read_address(path) == address:
            os.unlink(path)


def read_address(path: str | os.PathLike[str]) -> ServerAddress:
    """The address in ``path``; a file that is no such object is one line naming it."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AddressError(f"{p}: no model server address (start one with `forgetting serve`)") from None
    except (OSError, ValueError) as exc:
        raise AddressError(f"{p}: not a model server address file ({exc})") from None
    if not isinstance(data, dict):
        raise AddressError(f"{p}: not a model server address file (expected a JSON object)")
    for name, kind in _FIELDS.items():
        value = data.get(name)
        if name not in data or not isinstance(value, kind) or isinstance(value, bool):
            raise AddressError(f"{p}: field {name!r} missing or of the wrong type; "
                               "the file is written by `forgetting serve`")
    try:  # the same rule as model.endpoint.base_url: no credentials, never echoed
        check_base_url(data["base_url"], key=f"{p}: field 'base_url' (model.endpoint.address_file)")
    except ConfigError as exc:
        raise AddressError(str(exc)) from None
    return ServerAddress(**{k: data[k] for k in _FIELDS})


def wait_for_address(
    path: str | os.PathLike[str],
    timeout_s: float,
    *,
    say: Callable[[str], None] | None = None,
    poll_s: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
) -> ServerAddress:
    """The address once ``path`` exists (polled every ``poll_s``), at most ``timeout_s`` from now."""
    p = Path(path)
    for above in p.absolute().parents:  # a file where a folder of the path should be: it never appears
        if above.exists():
            if not above.is_dir():
                raise AddressError(f"{p}: {above} is not a directory; the address file cannot appear there "
                                   "(model.endpoint.address_file)")
            break
    deadline = time.monotonic() + timeout_s
    told = False
    while not p.exists():
        if time.monotonic() >= deadline:
            raise AddressError(
                f"{p}: no model server address after {timeout_s:g} s (model.endpoint.address_wait_s); start the "
                "server job (`forgetting serve`, docs/cluster.md route C) or check that it runs"
            )
        if say is not None and not told:
            say(f"waiting up to {timeout_s:g} s for the model server's address in {p}")
            told = True
        sleep(min(poll_s, max(0.0, deadline - time.monotonic())))
    return read_address(p)
