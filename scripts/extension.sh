#!/usr/bin/env bash
# Build the VS Code extension: npm ci, type check, esbuild bundle, dist/apprentice.vsix.
# The protocol types are generated from docs/protocol.schema.json by the type check and the
# build (vscode-extension/scripts/generateProtocol.mjs); a type error fails the build.
# Idempotent: npm ci is skipped when node_modules was installed from this very
# package-lock.json (its sha256 is kept in node_modules/.lock-hash after a good install).
# Needs Node 20+ and npm (the npm registry, on the first run). Run from anywhere.
set -euo pipefail
cd "$(dirname "$0")/../vscode-extension"

if ! command -v npm >/dev/null 2>&1; then
  echo "scripts/extension.sh: npm not found; install Node.js 20+ (with npm)" >&2
  exit 1
fi
node_major=$(node -p 'process.versions.node.split(".")[0]')
if (( node_major < 20 )); then
  echo "scripts/extension.sh: Node $(node --version) is too old; the extension needs Node 20+" >&2
  exit 1
fi

lock_hash=$(sha256sum package-lock.json | cut -d' ' -f1)
if [[ -f node_modules/.lock-hash && "$(cat node_modules/.lock-hash)" == "$lock_hash" ]]; then
  echo "==> node_modules matches package-lock.json; skipping npm ci"
else
  echo "==> npm ci"
  npm ci --no-audit --no-fund
  echo "$lock_hash" > node_modules/.lock-hash
fi

echo "==> typecheck (generated protocol types, tsc --noEmit)"
npm run typecheck
echo "==> build (dist/extension.js)"
npm run build
echo "==> package (dist/apprentice.vsix)"
npm run package
ls -l dist/apprentice.vsix
