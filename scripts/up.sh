#!/usr/bin/env bash
# From a fresh clone: install Apprentice into .venv and run `apprentice up` on embedded
# defaults (SQLite, embedded broker, the embedded dev model). Extra arguments go to `up`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
exec .venv/bin/apprentice up "$@"
