"""``forgetting preflight --serve``: the study's model server, started as a batch job starts it
(from its image, with the study's settings), answering ``/v1/models`` and ``/tokenize``; vLLM's own
KV-cache size, read from its log, against the batch's concurrency."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from typing import Any

from forgetting.cluster.preflight.checks import Check
from forgetting.run.batch import served_model
from forgetting.run.gpu_time import THROUGHPUT, max_model_len, run_cost
from forgetting.run.model_server import ModelServerError, open_local, served_name_of, serving
from forgetting.run.vllm_memory import runs_in_flight
from forgetting.study.config import Study

#: vLLM's log line once the KV cache is allocated (vllm/v1/core/kv_cache_utils.py)
KV_TOKENS = re.compile(r"GPU KV cache size: ([\d,]+) tokens")
PROBE_PROMPT = "def add(a, b):\n    return a + b\n"


def _json(url: str, body: dict[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with open_local(request, timeout=60) as resp:
        return json.loads(resp.read())


def serve_checks(study: Study) -> list[Check]:

    settings = study.runner
    model = served_model(study, settings)
    log = study.results_dir / "preflight" / "serve" / "model_server.log"
    log.unlink(missing_ok=True)
    name = served_name_of(model)
    out: list[Check] = []
    try:
        with serving(model, log_path=log, seed=study.seed, proxy_settings=study.proxy) as server:
            out.append(Check("serve", True, f"the {model['backend']} server answered /health after "
                             f"{server.startup_s or 0:.0f} s (log: {log})"))
            root = server.base_url.removesuffix("/v1")
            try:
                ids = [m.get("id") for m in _json(f"{server.base_url}/models").get("data", [])]
                out.append(Check("/v1/models", name in ids, f"serves {ids}" + ("" if name in ids else
                                 f"; expected {name!r} (model.served_name)")))
                if model["backend"] == "vllm":
                    answer = _json(f"{root}/tokenize", {"model": name, "prompt": PROBE_PROMPT})
                    count, limit = int(answer.get("count", 0)), answer.get("max_model_len")
                    ok = count > 0 and limit == max_model_len(study)
                    out.append(Check("/tokenize", ok, f"{count} tokens for a 2-line prompt, max_model_len {limit}"
                                     + ("" if ok else f"; expected tokens and {max_model_len(study)}")))
            except (urllib.error.URLError, OSError, ValueError, AttributeError) as exc:
                out.append(Check("/v1/models", False, f"{exc}; see {log}"))
    except ModelServerError as exc:
        out.append(Check("serve", False, f"{exc}"))
        return out
    found = KV_TOKENS.findall(log.read_text(encoding="utf-8", errors="replace")) if log.is_file() else []
    if found:
        tokens = int(found[-1].replace(",", ""))
        mean = round(run_cost(THROUGHPUT.typical_calls).mean_prompt)
        fit = tokens // mean
        wanted, key = runs_in_flight(study)
        ok = fit >= wanted
        out.append(Check("kv cache (vLLM's)", ok, f"{tokens:,} tokens: {fit} runs at {mean:,} tokens "
                         f"{'≥' if ok else '<'} {key} {wanted}"
                         + ("" if ok else f"; set {key}: {max(1, fit)}")))
    return out
