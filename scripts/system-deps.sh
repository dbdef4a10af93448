#!/usr/bin/env bash
# Debian packages the tests need (editors, browsers). Installs only what is missing.
set -euo pipefail
need=()
for pkg in ${APPRENTICE_APT_PACKAGES:-git neovim}; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if ((${#need[@]})); then
  echo "==> apt-get install ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
