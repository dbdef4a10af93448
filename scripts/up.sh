#!/usr/bin/env bash
# From a fresh clone: install Apprentice into .venv and run `apprentice up` on embedded
# defaults (SQLite, embedded broker, the embedded dev model). Extra arguments go to `up`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
# The admin dashboard at /admin/ needs Node.js to build; without it the rest runs as well.
if command -v npm >/dev/null 2>&1; then
  scripts/dashboard.sh || echo "==> the dashboard did not build; /admin/ will say so" >&2
else
  echo "==> npm not found: the admin dashboard (/admin/) is not built (scripts/dashboard.sh)" >&2
fi
exec .venv/bin/apprentice up "$@"
