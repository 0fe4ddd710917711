"""``forgetting serve``: the study's model server as a job of its own (route C of
docs/cluster.md: vLLM on the GPU partition, the batches on a CPU partition).

It starts the server the study describes — ``vllm serve`` from ``model.vllm`` (or, for tests
and the demo, the scripted stand-in) — listening on every interface, waits for its
``/health``, then publishes its address in ``model.endpoint.address_file`` (atomically:
:mod:`forgetting.endpoint.address`) and serves until SIGTERM or SIGINT (``scancel``, the
job's time limit) or until the server dies; on the way out it withdraws the address first,
so no batch connects to a server that is going away, then stops the server. The batches of
a study with ``model.backend: endpoint`` and that ``address_file`` wait for the file and
talk to the published address.

The API key: with ``model.endpoint.api_key_env`` set, nothing of the server answers without
that key. vLLM's own ``--api-key`` checks only the ``/v1`` paths (:mod:`.gate`), so the server
listens on 127.0.0.1 only and the published address is a front that checks the key on every
request, whatever its path or method, before forwarding it (:func:`.gate.gate`). vLLM gets the
key too (``VLLM_API_KEY`` in its environment — also ``APPTAINERENV_VLLM_API_KEY`` for an image
started with ``--cleanenv`` — never on its command line, which its log shows). Without a key,
the server listens on the address given and answers anyone who reaches it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import signal
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from forgetting.endpoint.address import ServerAddress, publish_address, withdraw_address
from forgetting.endpoint.gate import gate
from forgetting.foundation.errors import ConfigError, UserError
from forgetting.foundation.inputs import check_output_file
from forgetting.run.model_server import process_backend_of, served_name_of, server_for
from forgetting.study.config import Study
from forgetting.study.endpoint import EndpointSettings

#: what ``forgetting serve --backend`` can start
SERVABLE = ("vllm", "scripted")
#: how often the serving loop looks at the server
WATCH_S = 1.0


def advertised_host(bind: str) -> str:
    """The host batches connect to: the bind address, or this machine's name when it listens
    on every interface."""
    return socket.gethostname() if bind in ("0.0.0.0", "::", "") else bind


def url_host(host: str) -> str:
    """``host`` as a URL writes it: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def check_hosts(host: str, advertise: str | None) -> str:
    """The host the address file publishes, with ``--host`` and ``--advertise`` checked before
    any server starts: ``--host`` an IPv4 address this machine can listen on (or a name that
    resolves to one; the servers started here listen on IPv4), ``--advertise`` a host name or
    address a URL can hold (an IPv6 one is published in brackets) — each problem one line
    naming the option."""
    if ":" in host:
        raise UserError(f"--host {host!r}: an IPv6 address; forgetting serve listens on IPv4 (give 0.0.0.0 for "
                        "every interface, or an IPv4 address or host name of this machine)")
    try:
        socket.getaddrinfo(host, None, family=socket.AF_INET, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise UserError(f"--host {host!r}: not an IPv4 address to listen on ({exc}); give an address such as "
                        "0.0.0.0, or a host name of this machine that resolves") from None
    shown = advertise if advertise is not None else advertised_host(host)
    option = "--advertise" if advertise is not None else "--host"
    bad = not shown or not shown.isascii() or any(c.isspace() or not c.isprintable() or c in "/@?#[]" for c in shown)
    if not bad:
        try:
            bad = urlsplit(f"http://{url_host(shown)}:8000/v1").hostname is None
        except ValueError:  # "host:8000" read as a malformed IPv6 address
            bad = True
    if bad:
        raise UserError(f"{option} {shown!r}: not a host name or address batches can connect to "
                        "(such as gpu017, 10.0.0.7 or fd00::7; no scheme, port or path)")
    return shown


def server_model(study: Study, backend: str) -> dict[str, Any]:
    """The study's model section as a ``backend`` server starts from it."""
    if backend not in SERVABLE:
        raise ConfigError(f"--backend {backend!r}: forgetting serve starts {' or '.join(SERVABLE)}")
    model = study.model.as_dict()
    model["backend"] = backend
    if backend == "scripted":
        model["scripted"] = {**model["scripted"], "tasks": str(study.dataset.path)}
    return model


def key_env(settings: EndpointSettings) -> dict[str, str]:
    """The server's environment for the key (none without ``api_key_env``)."""
    key = settings.api_key()
    if key is None:
        return {}
    return {"VLLM_API_KEY": key, "APPTAINERENV_VLLM_API_KEY": key}


def serve(
    study: Study,
    *,
    backend: str = "vllm",
    host: str = "0.0.0.0",
    port: int = 0,
    advertise: str | None = None,
    log_path: Path | None = None,
    say: Callable[[str], None] = print,
    stop: threading.Event | None = None,
) -> int:
    """Serve the study's model until stopped (see the module docstring); return 0, or the
    server's exit status when it died."""
    settings = study.endpoint
    if settings is None:
        raise ConfigError("model.backend: forgetting serve publishes an endpoint's address: model.backend must be "
                          "'endpoint' (config/route-c.yaml)")
    if settings.address_file is None:
        raise ConfigError("model.endpoint.address_file: not set; forgetting serve publishes its address there "
                          "(and the batches read it from there)")
    check_output_file(settings.address_file, "model.endpoint.address_file")  # before a server starts
    shown = check_hosts(host, advertise)
    model = server_model(study, backend)
    env = key_env(settings) if backend == "vllm" else {}
    server_backend = process_backend_of(model)
    extra_env = {**server_backend.env(), **env}
    address_file = settings.address_file
    log_path = log_path or address_file.parent / "model_server.log"
    check_output_file(log_path, "--log", append=True)
    stop = stop or threading.Event()
    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    if threading.current_thread() is threading.main_thread():
        for s in previous:
            signal.signal(s, lambda *_: stop.set())
    address: ServerAddress | None = None
    stack = contextlib.ExitStack()
    try:
        if address_file.exists():
            os.unlink(address_file)  # a dead server's: batches wait for this one instead
            say(f"removed the address a previous server left in {address_file}")
        key = settings.api_key()
        # with a key, the server listens on loopback only, behind the key-checking front (.gate)
        inner_host, inner_port = ("127.0.0.1", None) if key else (host, port or None)
        server = server_for(model, log_path=log_path, seed=study.seed, host=inner_host, port=inner_port)
        say(f"starting the {backend} model server (log: {log_path})")
        server.start(timeout_s=server_backend.startup_timeout_s(model), env=extra_env)
        try:
            server_port = int(server.base_url.rsplit(":", 1)[1].split("/", 1)[0])
            front = stack.enter_context(gate(host, port, key=key, upstream_port=server_port)) if key else None
            bound_port = front.server_address[1] if front is not None else server_port
            if front is not None:
                say(f"every request needs the key from ${settings.api_key_env}: the model server listens on "
                    f"127.0.0.1:{server_port} only, behind the key check on port {bound_port}")
            address = ServerAddress(
                base_url=f"http://{url_host(shown)}:{bound_port}/v1", host=shown, port=bound_port,
                model=served_name_of(model), backend=backend,
                started=dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                job_id=os.environ.get("SLURM_JOB_ID") or None, pid=os.getpid(),
            )
            publish_address(address_file, address)
            say(f"serving {address.model!r} at {address.base_url} (ready in {server.startup_s or 0:.1f} s); "
                f"address published in {address_file}")
            while not stop.wait(WATCH_S):
                trouble = server.trouble(False)
                if trouble is not None:
                    say(f"error: {trouble}")
                    return int(server.process.returncode or 1) if server.process is not None else 1
            say("stopping: address withdrawn, server shutting down")
        finally:
            if address is not None:  # first: no batch may connect to a server going away
                withdraw_address(address_file, address)
            stack.close()
            server.stop()
    finally:
        if threading.current_thread() is threading.main_thread():
            for s, handler in previous.items():
                signal.signal(s, handler)
    return 0
