#!/usr/bin/env bash
# Build the admin dashboard (dashboard/: Vite + TypeScript + Chart.js) into dashboard/dist,
# which the agent server serves at /admin/. npm ci is skipped when node_modules was installed
# from this very package-lock.json; the build is skipped when dist/ is newer than every source.
# Needs Node 20.19+ and npm (the npm registry, on the first run). Run from anywhere.
set -euo pipefail
cd "$(dirname "$0")/../dashboard"

if ! command -v npm >/dev/null 2>&1; then
  echo "scripts/dashboard.sh: npm not found; install Node.js 20.19+ (with npm)" >&2
  exit 1
fi

lock_hash=$(sha256sum package-lock.json | cut -d' ' -f1)
if [[ -f node_modules/.lock-hash && "$(cat node_modules/.lock-hash)" == "$lock_hash" ]]; then
  echo "==> dashboard: node_modules matches package-lock.json; skipping npm ci"
else
  echo "==> dashboard: npm ci"
  npm ci --no-audit --no-fund
  echo "$lock_hash" > node_modules/.lock-hash
fi

newest_source=$(find src index.html vite.config.ts tsconfig.json package-lock.json -type f \
  -newer dist/index.html 2>/dev/null | head -1 || true)
if [[ -f dist/index.html && -z "$newest_source" ]]; then
  echo "==> dashboard: dist/ is up to date"
  exit 0
fi
echo "==> dashboard: typecheck (tsc --noEmit)"
npm run typecheck
echo "==> dashboard: build (dist/)"
npm run build
