#!/usr/bin/env bash
# Install code-server (VS Code in the browser) into .cache/code-server for the extension's
# end-to-end test (vscode-extension/test/e2e). Idempotent: skips when it is installed and runs.
#
# code-server@4.100.3 is the newest that runs on Node 20. Its @vscode/ripgrep dependency
# downloads rg from GitHub at install time, which is unreachable here, so we serve that download
# from the cache directory @vscode/ripgrep looks in first: a tarball holding Debian's rg
# (scripts/system-deps.sh installs ripgrep). npm_config_yes lets node-pty's step run `npx
# node-gyp` without a prompt; --unsafe-perm lets install scripts run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

CODE_SERVER_VERSION=4.100.3
RIPGREP_PACKAGE_VERSION=1.15.11
RIPGREP_ARCHIVE=ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz
prefix=.cache/code-server
bin="$prefix/node_modules/.bin/code-server"

# `code-server --version` writes a default config (with a password) to $XDG_CONFIG_HOME first;
# keep it in the cache, not in the person's ~/.config. Its version line: "4.100.3 <sha> with Code 1.100.3".
code_server_version() {
  XDG_CONFIG_HOME="$prefix/config" "$bin" --version 2>&1 | grep -E '^[0-9]+\.[0-9]+\.[0-9]+ ' | head -1
}

if [[ -x "$bin" ]] && version=$(code_server_version) && [[ -n "$version" ]]; then
  echo "==> code-server already installed: $version ($bin)"
  exit 0
fi

if [[ "$(uname -m)" != "x86_64" ]]; then
  echo "scripts/code-server.sh: only x86_64 is supported (the ripgrep cache names that build)" >&2
  exit 1
fi
rg_path=$(command -v rg || true)
if [[ -z "$rg_path" ]]; then
  echo "scripts/code-server.sh: rg not found; run scripts/system-deps.sh (package ripgrep)" >&2
  exit 1
fi

cache_dir="${TMPDIR:-/tmp}/vscode-ripgrep-cache-$RIPGREP_PACKAGE_VERSION"
if [[ ! -s "$cache_dir/$RIPGREP_ARCHIVE" ]]; then
  echo "==> caching Debian's rg as $cache_dir/$RIPGREP_ARCHIVE"
  mkdir -p "$cache_dir"
  staging=$(mktemp -d)
  trap 'rm -rf "$staging"' EXIT
  cp "$rg_path" "$staging/rg"
  # Write to a temp name first so an interrupted run never leaves a truncated archive behind.
  tar -czf "$cache_dir/$RIPGREP_ARCHIVE.partial" -C "$staging" rg
  mv "$cache_dir/$RIPGREP_ARCHIVE.partial" "$cache_dir/$RIPGREP_ARCHIVE"
fi

echo "==> installing code-server@$CODE_SERVER_VERSION into $prefix (about 4 minutes)"
mkdir -p "$prefix"
npm_config_yes=true npm install --prefix "$prefix" --unsafe-perm --no-audit --no-fund \
  "code-server@$CODE_SERVER_VERSION"

if ! version=$(code_server_version) || [[ -z "$version" ]]; then
  echo "scripts/code-server.sh: $bin was installed but \`--version\` prints no version:" >&2
  XDG_CONFIG_HOME="$prefix/config" "$bin" --version >&2 || true
  exit 1
fi
echo "==> code-server installed: $version ($bin)"
