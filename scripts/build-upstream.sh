#!/usr/bin/env bash
# Builds the upstream programs the lab runs, from the Go module proxy, with CGO off, each through a
# go.mod of the lab's own, and caches them outside the repo keyed by version (idempotent):
#   scripts/build-upstream.sh kubernetes [VERSION]  (default $LAB_KUBERNETES_VERSION, else
#       lab/versions.env's) kube-apiserver, kube-controller-manager,
#       kube-scheduler, kubelet, kube-proxy and kubectl in one `go build` (they share the compile
#       cache), plus the module's pause.c for the pause image
#   scripts/build-upstream.sh etcd                  etcd (server only; the lab speaks its HTTP API)
#   scripts/build-upstream.sh containerd            containerd, containerd-shim-runc-v2, ctr
#   scripts/build-upstream.sh metallb [VERSION]     MetalLB's speaker and controller (default
#       $LAB_METALLB_VERSION, else lab/versions.env's), with its metallb-native.yaml beside them
#   scripts/build-upstream.sh all                   the three at lab/versions.env's versions
# Each command prints the directory holding the binaries (`all` prints nothing).
# Versions: lab/versions.env. Go: the machine's (>= 1.26, GOTOOLCHAIN=local: nothing else is fetched).
# No fetched code enters the repo: modules and the build cache live under the cache directory.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../lab/versions.env
. "$here/lab/versions.env"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/drainguard"
mkdir -p "$cache"
log() { printf '[build-upstream] %s\n' "$*" >&2; }

go_bin=$(command -v go || true)
[ -n "$go_bin" ] || go_bin=/usr/local/go/bin/go
if [ ! -x "$go_bin" ]; then
  log "no Go found (PATH or /usr/local/go): the machine should have Go >= 1.26"
  exit 1
fi
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
export GOMODCACHE="$cache/go/mod" GOCACHE="$cache/go/build"
# One build at a time per cache (bootstrap runs this in the background; a second caller waits,
# then finds the stamps).
exec 9>"$cache/build-upstream.lock"
flock 9

# build NAME VERSION GOMOD_BODY PKG... -- writes the binaries of PKG... into $cache/NAME-VERSION,
# then runs $POST (a function name, if set) on that directory before it is marked complete. The
# stamp marks a complete build; a failed one leaves nothing behind but the Go caches.
build() {
  local name=$1 ver=$2 gomod=$3
  shift 3
  local out="$cache/$name-$ver" work="$cache/build/$name-$ver"
  if [ -f "$out/.complete" ]; then
    echo "$out"
    return 0
  fi
  rm -rf "$work" "$out.tmp" && mkdir -p "$work" "$out.tmp"
  printf '%s\n' "$gomod" >"$work/go.mod"
  local pkg names=()
  for pkg in "$@"; do
    [[ $pkg =~ /v[0-9]+$ ]] && pkg=${pkg%/*} # a module's major-version suffix: its directory names it
    names+=("${pkg##*/}")
  done
  log "$name $ver: go build ${names[*]} (cold: minutes on 2 cores)"
  local t0=$SECONDS
  # No DWARF: -w drops it from the binaries anyway, and the compiler then need not make it.
  (cd "$work" && "$go_bin" build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w ${LDFLAGS:-}" -o "$out.tmp/" "$@") >&2
  log "$name $ver: built in $((SECONDS - t0)) s"
  [ -z "${POST:-}" ] || "$POST" "$out.tmp" "$work"
  touch "$out.tmp/.complete"
  rm -rf "$out" && mv "$out.tmp" "$out"
  echo "$out"
}

kubernetes() {
  local ver=${1:-${LAB_KUBERNETES_VERSION:-$KUBERNETES_VERSION}}
  local minor=${ver#*.}
  minor=${minor%%.*}
  local out="$cache/kubernetes-$ver"
  if [ -f "$out/.complete" ]; then
    echo "$out"
    return 0
  fi
  # k8s.io/kubernetes points every staging module (k8s.io/api, client-go, …) at ./staging, and a
  # dependency's replaces are ignored: replace each with its published v0.<minor>.<patch>.
  local gomod_file
  gomod_file=$(cd "$cache" && GOFLAGS= "$go_bin" mod download -json "k8s.io/kubernetes@v$ver" |
    sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  local staging
  staging=$(awk -v v="v0.${ver#1.}" '$2 == "=>" && $3 ~ /^\.\/staging\// { print "replace " $1 " => " $1 " " v }' "$gomod_file")
  [ -n "$staging" ] || { log "k8s.io/kubernetes v$ver: no staging replaces in its go.mod"; exit 1; }
  local gomod
  gomod=$(printf 'module drainguard.lab/kubernetes\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes v%s\n\n%s\n' "$ver" "$staging")
  # The version stamp hack/lib/version.sh sets: kubectl version, Node.status.nodeInfo.kubeletVersion
  # (the webhook's native-sidecar choice reads it) and /version all report it.
  local ld="" key
  for key in "gitVersion=v$ver" "gitMajor=1" "gitMinor=$minor" "gitTreeState=clean" \
    "buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"; do
    ld+=" -X k8s.io/component-base/version.$key -X k8s.io/client-go/pkg/version.$key"
  done
  LDFLAGS="$ld" POST=kubernetes_extras build kubernetes "$ver" "$gomod" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet \
    k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kubectl
}

# The pause container's source and tag, for the pause image (scripts/build-images.sh).
kubernetes_extras() {
  local src
  src=$(cd "$2" && "$go_bin" list -m -f '{{.Dir}}' k8s.io/kubernetes)
  cp "$src/build/pause/linux/pause.c" "$1/pause.c"
  sed -n 's/^TAG ?= *//p' "$src/build/pause/Makefile" >"$1/pause.tag"
}

etcd() {
  local gomod
  gomod=$(printf 'module drainguard.lab/etcd\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/server/v3 v%s\n' "$ETCD_VERSION")
  POST=etcd_name build etcd "$ETCD_VERSION" "$gomod" go.etcd.io/etcd/server/v3
}
# server/main.go is package main: go names the binary after its directory.
etcd_name() { mv "$1/server" "$1/etcd"; }

containerd() {
  local gomod m=github.com/containerd/containerd/v2
  gomod=$(printf 'module drainguard.lab/containerd\n\ngo 1.26.0\n\nrequire %s v%s\n' "$m" "$CONTAINERD_VERSION")
  # CGO off leaves out the btrfs snapshotter (cgo only); the lab uses overlayfs.
  LDFLAGS="-X $m/version.Version=v$CONTAINERD_VERSION -X $m/version.Revision=module" \
    build containerd "$CONTAINERD_VERSION" "$gomod" "$m/cmd/containerd" "$m/cmd/containerd-shim-runc-v2" "$m/cmd/ctr"
}

metallb() {
  local ver=${1:-${LAB_METALLB_VERSION:-$METALLB_VERSION}} gomod m=go.universe.tf/metallb
  gomod=$(printf 'module drainguard.lab/metallb\n\ngo 1.26.0\n\nrequire %s v%s\n' "$m" "$ver")
  # The module's own version.go names the release; the commit is the tag's (its go.mod Origin).
  LDFLAGS="-X $m/internal/version.gitCommit=v$ver -X $m/internal/version.gitBranch=module" \
    POST=metallb_manifests build metallb "$ver" "$gomod" "$m/speaker" "$m/controller"
}
# MetalLB's own manifests beside the binaries (the lab installs them; nothing fetched enters the repo).
metallb_manifests() {
  local src
  src=$(cd "$2" && "$go_bin" list -m -f '{{.Dir}}' go.universe.tf/metallb)
  cp "$src/config/manifests/metallb-native.yaml" "$1/metallb-native.yaml"
}

case "${1:-all}" in
  kubernetes) kubernetes "${2:-}" ;;
  metallb) metallb "${2:-}" ;;
  etcd) etcd ;;
  containerd) containerd ;;
  all)
    kubernetes >/dev/null
    etcd >/dev/null
    containerd >/dev/null
    ;;
  *)
    echo "usage: $0 [kubernetes [VERSION]|etcd|containerd|metallb [VERSION]|all]" >&2
    exit 2
    ;;
esac
