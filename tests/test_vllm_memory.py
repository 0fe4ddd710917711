"""The KV-cache budget computed before any batch job: the per-token size from a model's
config.json, vLLM's start condition (one max_model_len sequence must fit), the prefix cache's
room for the batch's runs, and the one line that names the setting to change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forgetting.foundation.errors import ResourceError
from forgetting.run.vllm_memory import (
    GIB,
    Budget,
    ModelShape,
    find_model_dir,
    kv_budget_line,
    prefix_cache_line,
    weights_bytes,
)

#: the fields of Qwen/Qwen3-Coder-30B-A3B-Instruct's config.json that size its KV cache
QWEN3_CODER = {"architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 2048, "num_attention_heads": 32,
               "num_hidden_layers": 48, "num_key_value_heads": 4, "head_dim": 128, "torch_dtype": "bfloat16",
               "max_position_embeddings": 262144}
WEIGHTS = 57 * GIB


def shape(tmp_path: Path, **changes) -> ModelShape:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**QWEN3_CODER, **changes}))
    return ModelShape.from_config(path)


def budget(total: int, *, kv: str = "auto", utilization: float = 0.9, max_model_len: int = 262144,
           concurrency: int = 16) -> Budget:
    per = 2 * 48 * 4 * 128 * (1 if kv.startswith("fp8") else 2)
    return Budget(total=total, utilization=utilization, weights=WEIGHTS, overhead=4 * GIB, per_token=per,
                  kv_cache_dtype=kv, model_dtype="bfloat16", max_model_len=max_model_len, concurrency=concurrency,
                  mean_context=23450)


def test_qwen3_coder_needs_96_kib_per_token_and_24_gib_per_full_sequence(tmp_path):
    s = shape(tmp_path)
    assert s.kv_bytes_per_token() == 2 * 48 * 4 * 128 * 2 == 96 * 1024
    assert s.kv_bytes_per_token("fp8") == 48 * 1024
    assert budget(96 * 10**9).need_one == 24 * GIB  # 262,144 tokens × 96 KiB


def test_a_96_gb_gh200_at_0_9_cannot_start_vllm_and_the_line_says_what_to_set():
    ok, line = kv_budget_line(budget(96 * 10**9))
    assert not ok
    assert line.startswith("vLLM will refuse to start: one 262,144-token sequence needs 24.00 GiB of KV cache")
    assert "0.90 × 89.41 GiB − 57.00 GiB weights − 4.00 GiB overhead = 19.47 GiB" in line
    assert "model.vllm.kv_cache_dtype: fp8 (needs 12.00 GiB)" in line
    assert "model.vllm.max_model_len: 212608 or less" in line
    assert "model.vllm.gpu_memory_utilization: 0.96" in line
    for fix in (budget(96 * 10**9, kv="fp8"), budget(96 * 10**9, max_model_len=212608),
                budget(96 * 10**9, utilization=0.96)):
        assert kv_budget_line(fix)[0], kv_budget_line(fix)[1]
    assert not kv_budget_line(budget(96 * 10**9, max_model_len=212624))[0]  # one block more does not fit


def test_the_prefix_cache_must_hold_the_batchs_runs():
    ok, line = prefix_cache_line(budget(96 * 10**9, kv="fp8"))
    assert ok and line == ("the KV cache holds 425,232 tokens: 18 runs at a typical run's mean context of 23,450 "
                           "tokens ≥ execution.concurrency 16")
    ok, line = prefix_cache_line(budget(96 * 10**9, max_model_len=131072))
    assert not ok
    assert "9 runs at a typical run's mean context" in line and "< execution.concurrency 16" in line
    assert line.endswith("set execution.concurrency: 9 or model.vllm.kv_cache_dtype: fp8")
    big = budget(144 * 10**9)
    assert kv_budget_line(big)[0] and prefix_cache_line(big) == (True, prefix_cache_line(big)[1])
    assert "27 runs" in prefix_cache_line(big)[1]


def test_a_config_without_the_fields_is_one_error_naming_the_field(tmp_path):
    with pytest.raises(ResourceError, match=r"config.json: num_hidden_layers is None, not a positive integer"):
        shape(tmp_path, num_hidden_layers=None)
    with pytest.raises(ResourceError, match=r"torch_dtype is 'int4'"):
        shape(tmp_path, torch_dtype="int4")
    # no head_dim: hidden_size / num_attention_heads, as transformers derives it
    cfg = {k: v for k, v in QWEN3_CODER.items() if k != "head_dim"}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert ModelShape.from_config(tmp_path / "config.json").head_dim == 64


def test_the_model_is_found_in_the_hugging_face_cache(tmp_path):
    repo = tmp_path / "hf" / "hub" / "models--Qwen--Qwen3-Coder-30B-A3B-Instruct"
    snap = repo / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(QWEN3_CODER))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123\n")
    (snap / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 61_000_000_000}}))
    found, looked = find_model_dir("Qwen/Qwen3-Coder-30B-A3B-Instruct",
                                   environ={"APPTAINERENV_HF_HOME": str(tmp_path / "hf"), "HOME": str(tmp_path)})
    assert found == snap and looked[0] == repo
    assert weights_bytes(found) == 61_000_000_000
    (snap / "model.safetensors.index.json").unlink()
    (snap / "model-00001-of-00002.safetensors").write_bytes(b"x" * 10)
    (snap / "model-00002-of-00002.safetensors").write_bytes(b"x" * 5)
    assert weights_bytes(found) == 15
    missing, looked = find_model_dir("Qwen/Other", environ={"HOME": str(tmp_path)})
    assert missing is None and looked == [tmp_path / ".cache" / "huggingface" / "hub" / "models--Qwen--Other"]
    assert find_model_dir("x", configured=str(snap))[0] == snap


def test_route_cs_one_server_holds_the_runs_in_flight_of_every_batch_job():
    """Route C: the cap on runs in flight across all batch jobs (model.endpoint.runs_in_flight)
    is what the server's KV cache must hold, not one batch's concurrency."""
    import dataclasses

    import yaml

    from forgetting.run.vllm_memory import runs_in_flight
    from forgetting.study.config import merge_configs, study_from_mapping
    from forgetting_testkit.checkout import ROOT

    base = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    route_c = study_from_mapping(merge_configs(base, yaml.safe_load((ROOT / "config" / "route-c.yaml").read_text())),
                                 source="test", root=ROOT)
    assert runs_in_flight(route_c) == (27, "model.endpoint.runs_in_flight")
    assert runs_in_flight(study_from_mapping(base, source="test", root=ROOT)) == (16, "execution.concurrency")
    big = dataclasses.replace(budget(144 * 10**9), concurrency=27, in_flight_key="model.endpoint.runs_in_flight")
    assert prefix_cache_line(big) == (True, "the KV cache holds 652,064 tokens: 27 runs at a typical run's mean "
                                            "context of 23,450 tokens ≥ model.endpoint.runs_in_flight 27")
    ok, line = prefix_cache_line(dataclasses.replace(big, concurrency=128))  # 8 batch jobs × 16: the old route C
    assert not ok and "< model.endpoint.runs_in_flight 128" in line
    assert "set model.endpoint.runs_in_flight: 27" in line


def test_a_served_dtype_sizes_the_weights_and_an_auto_kv_cache_in_it(tmp_path):
    """model.vllm.dtype: float32 doubles a bf16 model's weights and its auto KV cache in the
    budget (vLLM casts as it loads); an explicit kv_cache_dtype keeps its own size."""
    import yaml

    from forgetting.run.vllm_memory import budget_for
    from forgetting.study.config import merge_configs, study_from_mapping
    from forgetting_testkit.checkout import ROOT

    (tmp_path / "config.json").write_text(json.dumps(QWEN3_CODER))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 1000}}))
    base = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())

    def with_vllm(**vllm) -> Budget:
        study = study_from_mapping(merge_configs(base, {"model": {"vllm": vllm}}), source="test", root=ROOT)
        return budget_for(study, 144 * 10**9, tmp_path)

    auto, fp32 = with_vllm(), with_vllm(dtype="float32")
    assert (auto.weights, auto.per_token, auto.dtype_name()) == (1000, 96 * 1024, "bf16")
    assert (fp32.weights, fp32.per_token, fp32.dtype_name()) == (2000, 192 * 1024, "float32")
    fp8 = with_vllm(dtype="float32", kv_cache_dtype="fp8")
    assert (fp8.weights, fp8.per_token) == (2000, 48 * 1024)


SMOLLM2 = {"architectures": ["LlamaForCausalLM"], "hidden_size": 576, "num_attention_heads": 9,
           "num_hidden_layers": 30, "num_key_value_heads": 3, "head_dim": 64, "torch_dtype": "bfloat16"}


def cpu_study(tmp_path: Path, **model):
    """A study served by vLLM's CPU build (SmolLM2's shape, an 8,192-token window, one run at a time)."""
    import yaml

    from forgetting.study.config import merge_configs, study_from_mapping
    from forgetting_testkit.checkout import ROOT

    (tmp_path / "config.json").write_text(json.dumps(SMOLLM2))
    base = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    part = {"context_window": 8192, **model, "vllm": {"device": "cpu", "apptainer_image": None, "dtype": "float32",
                                                      **model.get("vllm", {})}}
    return study_from_mapping(merge_configs(base, {"model": part, "execution": {"concurrency": 1}}),
                              source="test", root=ROOT)


def test_a_cpu_server_with_a_short_window_holds_one_run_at_its_window_not_the_typical_run(tmp_path):
    """Seen on the real vLLM (the lane's demo): a typical run's mean context (23,450 tokens) is
    larger than an 8,192-token window, which no run outgrows; the preflight refused a 1 GiB cache
    that holds two whole windows, and told a study at concurrency 1 to set concurrency 1."""
    from forgetting.run.vllm_memory import budget_for

    study = cpu_study(tmp_path)
    b = budget_for(study, 1 * GIB, tmp_path, cpu=True)
    assert (b.block_tokens, b.mean_context, b.per_token) == (128, 8192, 2 * 30 * 3 * 64 * 4)
    assert kv_budget_line(b)[0]
    assert prefix_cache_line(b) == (True, "the KV cache holds 23,296 tokens: 2 runs at a typical run's mean context "
                                          "of 8,192 tokens ≥ execution.concurrency 1")
    # a cache too small for one window: the CPU's setting, never a GPU's or a concurrency of 0
    small = budget_for(study, GIB // 4, tmp_path, cpu=True)
    ok, line = kv_budget_line(small)
    assert not ok and "model.vllm.cpu_kv_space_gib: 0.5" in line and "gpu_memory_utilization" not in line
    import dataclasses

    ok, line = prefix_cache_line(dataclasses.replace(b, concurrency=3))
    # (no fp8 cache on a CPU: vLLM's CPU build takes one only with AVX-512 or AMX)
    assert not ok and line.endswith("set execution.concurrency: 2 or model.vllm.cpu_kv_space_gib: 1.25")
    # model.vllm.block_size is the server's block
    assert budget_for(cpu_study(tmp_path, vllm={"block_size": 32}), GIB, tmp_path, cpu=True).block_tokens == 32
