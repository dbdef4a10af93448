#!/usr/bin/env bash
# Serve a model with vLLM (CPU build, from .vllm-venv) on 127.0.0.1 for Apprentice's HTTP backend.
#
# Usage: scripts/vllm-serve.sh MODEL_DIR [PORT] [extra vLLM args...]
#   e.g. scripts/vllm-serve.sh .cache/dev-model 8000
#        APPRENTICE_MODEL_BACKEND=openai APPRENTICE_MODEL_NAME=apprentice-dev apprentice serve
#
# The served name is "apprentice-dev" (override with VLLM_SERVED_NAME); LoRA adapters are
# loaded at runtime (POST /v1/load_lora_adapter) and selected by passing their name as "model".
# Runs in the foreground; Ctrl-C stops it. tests/fixtures/vllm.py builds the same command line
# (agent_server/models/vllm_command.py), so change both through that module's constants.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ $# -lt 1 ]]; then
  echo "usage: $0 MODEL_DIR [PORT] [extra vLLM args...]" >&2
  exit 2
fi
model_dir=$(realpath "$1")
port=${2:-8000}
shift $(( $# >= 2 ? 2 : 1 ))

if [[ ! -f "$model_dir/config.json" ]]; then
  echo "error: $model_dir has no config.json (install the real model: apprentice model install --out DIR; or the dev model: apprentice model build-dev --out DIR)" >&2
  exit 2
fi
if [[ ! -x .vllm-venv/bin/python ]]; then
  echo "error: .vllm-venv is missing; run scripts/vllm-env.sh first" >&2
  exit 2
fi

# One place builds the argument list so the script, the test fixture and the benchmark agree.
mapfile -t cmd < <(.venv/bin/python -m agent_server.models.vllm_command "$model_dir" "$port")
export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1}
export VLLM_ALLOW_RUNTIME_LORA_UPDATING=True
echo "==> ${cmd[*]} $*" >&2
exec "${cmd[@]}" "$@"
