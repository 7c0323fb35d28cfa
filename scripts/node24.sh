#!/usr/bin/env bash
# Prints the path of a Node >= 24 binary: the system one if new enough, else the `node@24`
# package from the npm registry installed once into the cache.
set -euo pipefail
cache="${XDG_CACHE_HOME:-$HOME/.cache}/drainguard"
major() { "$1" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }
if command -v node >/dev/null 2>&1 && [ "$(major node)" -ge 24 ]; then command -v node; exit 0; fi
dir="$cache/node24"
bin="$dir/node_modules/node/bin/node"
if [ ! -x "$bin" ] || [ "$(major "$bin")" -lt 24 ]; then
  echo "[bootstrap] installing node@24 from the npm registry into $dir" >&2
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
  (cd "$dir.tmp" && npm init -y >/dev/null && npm install --no-audit --no-fund --loglevel=error node@24 >&2)
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
fi
echo "$bin"
