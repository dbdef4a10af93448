#!/usr/bin/env bash
# Debian packages the tests need (editors, browsers). Installs only what is missing.
# neovim: the LSP tests' editor; libkrb5/libx11/libxkbfile/libsecret dev headers: code-server's
# native modules (scripts/code-server.sh); ripgrep: the rg code-server's install is served;
# chromium: the headless browser that drives code-server in the extension's e2e test.
set -euo pipefail
need=()
for pkg in ${APPRENTICE_APT_PACKAGES:-git neovim libkrb5-dev libx11-dev libxkbfile-dev libsecret-1-dev ripgrep chromium}; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if ((${#need[@]})); then
  echo "==> apt-get install ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
