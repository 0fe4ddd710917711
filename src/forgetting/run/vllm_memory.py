"""Will vLLM start, and will its prefix cache hold the batch's runs? The KV-cache budget.

vLLM (``vllm/v1/worker/gpu_worker.py``, ``vllm/v1/core/kv_cache_utils.py``) gives the KV cache
what is left of ``gpu_memory_utilization × total GPU memory`` after its profiling pass (the
weights, the activations' peak, non-torch memory), and refuses to start — "To serve at least
one request with the models's max seq len (…), (… GiB KV cache is needed, which is larger than
the available KV cache memory (… GiB)" — when one sequence of ``max_model_len`` tokens does not
fit. A full-attention layer stores, per token, a key and a value of ``num_kv_heads × head_dim``
elements (``kv_cache_interface.py``: ``2 × block_size × num_kv_heads × head_size × dtype size``
bytes per 16-token block), so per token

    2 × num_hidden_layers × num_key_value_heads × head_dim × bytes per element

— for Qwen3-Coder-30B-A3B-Instruct (its ``config.json``: 48 layers, 4 KV heads, head_dim 128)
in bf16: 2 × 48 × 4 × 128 × 2 = 98,304 bytes = 96 KiB, and 24 GiB for one 262,144-token
sequence. This module computes the same from the model's ``config.json``, its weights' size
and the GPU's memory (``nvidia-smi``), before any batch job starts, and says which setting to
change. The activations' peak is not known before vLLM runs: ``model.vllm.overhead_gib`` stands
for it (``forgetting preflight --serve`` reads vLLM's own figure from its log).

The second question is the study's own: each run in flight keeps its history's blocks in the
prefix cache between its calls. When the batch's runs need more blocks than the cache has,
vLLM evicts the least recently used, the next call of that run recomputes them, and the
cached-token counts the study compares fall. :func:`prefix_cache_line` compares the cache's
tokens with ``execution.concurrency`` runs at a typical run's mean context
(:mod:`forgetting.run.gpu_time`; at most the context window, which no run outgrows).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from forgetting.foundation.errors import ResourceError
from forgetting.run.gpu_time import THROUGHPUT, max_model_len, run_cost

GIB = 1 << 30
#: vLLM's default KV-cache block size on CUDA (tokens); a sequence takes whole blocks
BLOCK_TOKENS = 16
#: its default on a CPU (``vllm/platforms/cpu.py``, ``CpuPlatform.check_and_update_config``: 128
#: unless ``--block-size`` names one; MLA models excepted)
CPU_BLOCK_TOKENS = 128
#: bytes per element of the model's dtype (config.json ``torch_dtype`` / ``dtype``)
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
#: bytes per element of ``--kv-cache-dtype`` (``auto``: the model's)
KV_DTYPE_BYTES = {"bfloat16": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}


@dataclass(frozen=True)
class ModelShape:
    """What of a model's ``config.json`` sizes its KV cache."""

    layers: int
    kv_heads: int
    head_dim: int
    dtype: str

    @classmethod
    def from_config(cls, path: str | os.PathLike[str]) -> ModelShape:
        """From ``config.json``; a missing or odd field is a ResourceError naming it."""
        p = Path(path)
        try:
            cfg = json.loads(p.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ResourceError(f"{p}: cannot read the model's config ({exc.strerror or exc})") from None
        except ValueError as exc:
            raise ResourceError(f"{p}: not valid JSON ({exc})") from None
        if not isinstance(cfg, dict):
            raise ResourceError(f"{p}: not a model config (a JSON object)")

        def number(key: str, fallback: int | None = None) -> int:
            value = cfg.get(key, fallback)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ResourceError(f"{p}: {key} is {value!r}, not a positive integer")
            return value

        heads = cfg.get("num_attention_heads")
        head_dim_fallback = cfg["hidden_size"] // heads if isinstance(heads, int) and heads and \
            isinstance(cfg.get("hidden_size"), int) else None
        dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "")
        if dtype not in DTYPE_BYTES:
            raise ResourceError(f"{p}: torch_dtype is {dtype or None!r}; expected one of {', '.join(DTYPE_BYTES)}")
        return cls(
            layers=number("num_hidden_layers"),
            kv_heads=number("num_key_value_heads", heads if isinstance(heads, int) else None),
            head_dim=number("head_dim", head_dim_fallback),
            dtype=dtype,
        )

    def kv_bytes_per_token(self, kv_cache_dtype: str = "auto") -> int:
        """Key and value of every layer for one token."""
        element = DTYPE_BYTES[self.dtype] if kv_cache_dtype == "auto" else KV_DTYPE_BYTES[kv_cache_dtype]
        return 2 * self.layers * self.kv_heads * self.head_dim * element


def kv_bytes(tokens: int, per_token: int, block: int = BLOCK_TOKENS) -> int:
    """KV cache of one sequence of ``tokens`` tokens (whole ``block``-token blocks, as vLLM allocates)."""
    return math.ceil(tokens / block) * block * per_token


def block_tokens(vllm: Mapping[str, Any], cpu: bool) -> int:
    """The server's KV-cache block: ``model.vllm.block_size``, else vLLM's default on the device."""
    if vllm.get("block_size"):
        return int(vllm["block_size"])
    return CPU_BLOCK_TOKENS if cpu else BLOCK_TOKENS


def hub_dirs(environ: Mapping[str, str]) -> list[Path]:
    """Where a Hugging Face cache may be, in the order ``huggingface_hub`` reads them (plus the
    ``APPTAINERENV_`` form docs/cluster.md has users export for the server's container)."""
    out = []
    if environ.get("HF_HUB_CACHE"):
        out.append(Path(environ["HF_HUB_CACHE"]))
    for key in ("HF_HOME", "APPTAINERENV_HF_HOME"):
        if environ.get(key):
            out.append(Path(environ[key]) / "hub")
    out.append(Path(environ.get("HOME", str(Path.home()))) / ".cache" / "huggingface" / "hub")
    return out


def find_model_dir(name: str, configured: str | None = None,
                   environ: Mapping[str, str] | None = None) -> tuple[Path | None, list[Path]]:
    """``(directory with config.json, or None; the places looked at)`` for model ``name``:
    ``model.vllm.model_dir`` where given, else the snapshot its cache's ``refs/main`` names (or
    the newest snapshot) in the first Hugging Face cache that has it."""
    env = os.environ if environ is None else environ
    if configured:
        path = Path(os.path.expandvars(os.path.expanduser(configured)))
        return (path if (path / "config.json").is_file() else None), [path]
    local = Path(os.path.expandvars(os.path.expanduser(name)))
    if local.is_dir():  # a local model directory is a model (vLLM loads it as such)
        return (local if (local / "config.json").is_file() else None), [local]
    looked = []
    for hub in hub_dirs(env):
        repo = hub / ("models--" + name.replace("/", "--"))
        looked.append(repo)
        snapshots = repo / "snapshots"
        if not snapshots.is_dir():
            continue
        ref = repo / "refs" / "main"
        if ref.is_file():
            candidate = snapshots / ref.read_text(encoding="utf-8").strip()
            if (candidate / "config.json").is_file():
                return candidate, looked
        found = sorted((d for d in snapshots.iterdir() if (d / "config.json").is_file()),
                       key=lambda d: d.stat().st_mtime)
        if found:
            return found[-1], looked
    return None, looked


def served_weights_bytes(model_dir: Path, dtype: str) -> int:
    """The weights' memory once loaded in ``dtype``: their files' size, scaled from the dtype
    the model's ``config.json`` names to ``dtype`` (vLLM's ``--dtype`` casts as it loads)."""
    stored = ModelShape.from_config(model_dir / "config.json").dtype
    return weights_bytes(model_dir) * DTYPE_BYTES[dtype] // DTYPE_BYTES[stored]


def weights_bytes(model_dir: Path) -> int:
    """The weights' size: the safetensors index's ``metadata.total_size``, else the sum of the
    ``*.safetensors`` files (followed through the cache's symlinks)."""
    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        try:
            total = json.loads(index.read_text(encoding="utf-8"))["metadata"]["total_size"]
        except (ValueError, KeyError, TypeError):
            raise ResourceError(f"{index}: no metadata.total_size") from None
        if isinstance(total, int) and total > 0:
            return total
        raise ResourceError(f"{index}: metadata.total_size is {total!r}")
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise ResourceError(f"{model_dir}: no *.safetensors weights (is the download complete?)")
    return sum(f.stat().st_size for f in files)


@dataclass(frozen=True)
class Budget:
    """The figures of one GPU's KV-cache budget (bytes, tokens)."""

    total: int
    utilization: float
    weights: int
    overhead: int
    per_token: int
    kv_cache_dtype: str
    model_dtype: str
    max_model_len: int
    concurrency: int
    mean_context: int
    #: the key ``concurrency`` comes from: the runs in flight on this one server
    in_flight_key: str = "execution.concurrency"
    #: the server's KV-cache block (tokens)
    block_tokens: int = BLOCK_TOKENS
    #: vLLM's CPU build: ``total`` is ``model.vllm.cpu_kv_space_gib``, all of it KV cache
    cpu: bool = False

    @property
    def available(self) -> int:
        return int(self.total * self.utilization) - self.weights - self.overhead

    @property
    def need_one(self) -> int:
        return kv_bytes(self.max_model_len, self.per_token, self.block_tokens)

    @property
    def capacity_tokens(self) -> int:
        return max(0, self.available) // (self.block_tokens * self.per_token) * self.block_tokens

    @property
    def runs_fit(self) -> int:
        return self.capacity_tokens // max(1, self.mean_context)

    def dtype_name(self) -> str:
        name = self.model_dtype if self.kv_cache_dtype == "auto" else self.kv_cache_dtype
        return {"bfloat16": "bf16", "float16": "fp16"}.get(name, name)


def gib(n: float) -> str:
    return f"{n / GIB:.2f} GiB"


def kv_space_setting(need: int) -> str:
    """``model.vllm.cpu_kv_space_gib`` that holds ``need`` bytes (rounded up to a quarter GiB)."""
    return f"model.vllm.cpu_kv_space_gib: {math.ceil(need / GIB * 4) / 4:g}"


def fp8_helps(b: Budget) -> bool:
    """Whether ``model.vllm.kv_cache_dtype: fp8`` is advice worth giving: the cache is in the model's
    wider dtype, on a GPU (vLLM's CPU build takes an fp8 cache only with AVX-512 or AMX, and only
    for some head sizes: ``vllm/v1/attention/backends/cpu_attn.py``; there the cache's space is the
    setting to change)."""
    return not b.cpu and b.kv_cache_dtype == "auto" and DTYPE_BYTES.get(b.model_dtype, 1) > 1


def kv_budget_line(b: Budget) -> tuple[bool, str]:
    """(ok, one line): does one ``max_model_len`` sequence fit, as vLLM requires to start?"""
    per = f"{b.dtype_name()}, {b.per_token / 1024:g} KiB per token"
    sums = (f"{b.utilization:.2f} × {gib(b.total)} − {gib(b.weights)} weights − {gib(b.overhead)} overhead "
            f"= {gib(b.available)}")
    if b.available >= b.need_one:
        return True, f"{sums} of KV cache ≥ {gib(b.need_one)} for one {b.max_model_len:,}-token sequence ({per})"
    fixes = []
    if fp8_helps(b):
        half = kv_bytes(b.max_model_len, b.per_token // DTYPE_BYTES[b.model_dtype], b.block_tokens)
        if b.available >= half:
            fixes.append(f"model.vllm.kv_cache_dtype: fp8 (needs {gib(half)})")
    fitting_len = b.capacity_tokens
    if fitting_len >= 1024:
        fixes.append(f"model.vllm.max_model_len: {fitting_len} or less")
    if b.cpu:
        fixes.append(kv_space_setting(b.need_one))
    else:
        utilization = math.ceil((b.weights + b.overhead + b.need_one) / b.total * 100) / 100
        if utilization <= 0.98:
            fixes.append(f"model.vllm.gpu_memory_utilization: {utilization:.2f}")
    advice = ("; set " + ", or ".join(fixes)) if fixes else \
        "; use a GPU with more memory, or more GPUs (model.vllm.tensor_parallel_size)"
    return False, (f"vLLM will refuse to start: one {b.max_model_len:,}-token sequence needs {gib(b.need_one)} of KV "
                   f"cache ({per}), but {sums}{advice}")


def prefix_cache_line(b: Budget) -> tuple[bool, str]:
    """(ok, one line): do ``execution.concurrency`` runs' histories fit in the prefix cache?"""
    head = (f"the KV cache holds {b.capacity_tokens:,} tokens: {b.runs_fit} runs at a typical run's mean context "
            f"of {b.mean_context:,} tokens")
    if b.runs_fit >= b.concurrency:
        return True, f"{head} ≥ {b.in_flight_key} {b.concurrency}"
    fixes = [f"{b.in_flight_key}: {b.runs_fit}"] if b.runs_fit >= 1 else []
    if b.cpu:
        fixes.append(kv_space_setting(b.concurrency * kv_bytes(b.mean_context, b.per_token, b.block_tokens)))
    if fp8_helps(b):
        fixes.append("model.vllm.kv_cache_dtype: fp8")
    return False, (f"{head} < {b.in_flight_key} {b.concurrency}: vLLM evicts runs' cached prefixes between "
                   f"their calls and the cached-token counts fall; set {' or '.join(fixes)}")


def budget_for(study: Any, total_bytes: int, model_dir: Path, *, cpu: bool = False) -> Budget:
    """The budget of ``study`` on a GPU of ``total_bytes``, the model read from ``model_dir``;
    ``cpu``: ``total_bytes`` is the KV cache itself (vLLM's CPU build takes
    ``VLLM_CPU_KVCACHE_SPACE`` whole for it: ``model.vllm.cpu_kv_space_gib``)."""

    vllm = study.model.vllm
    shape = ModelShape.from_config(model_dir / "config.json")
    kv_dtype = str(vllm["kv_cache_dtype"])
    served = str(vllm["dtype"])
    if served != "auto":  # --dtype casts the weights as they load: their memory, and an auto KV cache's
        shape = replace(shape, dtype=served)
    window = max_model_len(study)
    concurrency, in_flight_key = runs_in_flight(study)
    return Budget(
        total=total_bytes,
        utilization=1.0 if cpu else float(vllm["gpu_memory_utilization"]),
        weights=0 if cpu else served_weights_bytes(model_dir, shape.dtype),
        overhead=0 if cpu else int(float(vllm["overhead_gib"]) * GIB),
        per_token=shape.kv_bytes_per_token(kv_dtype),
        kv_cache_dtype=kv_dtype,
        model_dtype=shape.dtype,
        max_model_len=window,
        concurrency=concurrency,
        # a run's context never outgrows the server's window
        mean_context=min(round(run_cost(THROUGHPUT.typical_calls).mean_prompt), window),
        in_flight_key=in_flight_key,
        block_tokens=block_tokens(vllm, cpu),
        cpu=cpu,
    )


def runs_in_flight(study: Any) -> tuple[int, str]:
    """The runs one server holds at once, and the key that says so: a batch's
    ``execution.concurrency`` beside its own vLLM; route C's ``model.endpoint.runs_in_flight``
    for the one server of every batch job (the workflow caps them through ``endpoint_runs``)."""
    cap = study.model.endpoint_runs_in_flight
    if study.model.backend == "endpoint" and cap is not None:
        return cap, "model.endpoint.runs_in_flight"
    return int(study.plan.concurrency), "execution.concurrency"
