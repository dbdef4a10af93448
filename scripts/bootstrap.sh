#!/usr/bin/env bash
# Make .venv with Apprentice installed (editable). `--dev` adds the test extras.
# Idempotent: a second run only installs what changed. Used by scripts/up.sh and scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
extras=""
[[ "${1:-}" == "--dev" ]] && extras="[dev]"

if [[ ! -x .venv/bin/python ]]; then
  echo "==> making .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
  .venv/bin/pip install -q --upgrade pip
fi
stamp=".venv/.installed${extras}"
if [[ ! -f "$stamp" || pyproject.toml -nt "$stamp" ]]; then
  echo "==> installing apprentice${extras} into .venv"
  # torch first and pinned: the CPU build lies on disk; anything looser pulls a CUDA build.
  .venv/bin/pip install -q "torch==2.13.0"
  .venv/bin/pip install -q -e ".${extras}"
  # These break `import transformers` beside the CPU torch (field notes); never keep them.
  .venv/bin/pip uninstall -q -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
  touch "$stamp"
fi
