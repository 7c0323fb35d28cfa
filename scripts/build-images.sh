#!/usr/bin/env bash
# `make image`: builds the local cluster's images with buildah, never pulling anything (no registry
# is reachable here), idempotent and cached by content. Each image is also saved as a
# docker-archive under the cache, which lab/cluster imports into every node's containerd.
#   registry.k8s.io/pause:<tag>               from the Kubernetes module's pause.c, at its Makefile's tag
#   docker.io/library/node:24-bookworm-slim   a LOCAL STAND-IN for the official image (debootstrap
#                                             minbase + Node 24 + npm + this machine's CA bundle)
#   docker.io/library/drainguard:dev          the repo's Dockerfile, unchanged
#   docker.io/library/drainguard-lab:dev      lab/sim/image/Dockerfile: the simulators (MetalLB speaker,
#                                             lease candidate / skupper router, ARP client)
# Prints one line per image (name, size) and, last, the path of images.json describing them.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/drainguard"
out="$cache/images"
mkdir -p "$out"
log() { printf '[image] %s\n' "$*" >&2; }
k8s=$("$here/scripts/build-upstream.sh" kubernetes)
node_bin=$("$here/scripts/node24.sh")
# The images are built for this machine's Node 24; the build stages run `npm ci` through the
# machine's egress proxy, whose CA the stand-in base carries (see below).
ca_bundle=/etc/ssl/certs/ca-certificates.crt

have_image() { buildah inspect --type image "$1" >/dev/null 2>&1; }
# key FILE...: a content hash of the inputs (names and bytes). Names inside the checkout are
# taken relative to it: every clone (CI checks out afresh) must find the same cached images.
key() { (for f in "$@"; do printf '%s\n' "${f#"$here"/}"; cat "$f"; done) | sha256sum | cut -c1-16; }
# save NAME KEY: the docker-archive containerd imports; skipped when it exists for this key.
save() {
  local name=$1 k=$2 tar="$out/$(echo "$1" | tr '/:' '__')-$2.tar"
  if [ ! -f "$tar" ]; then
    rm -f "$out/$(echo "$name" | tr '/:' '__')"-*.tar
    buildah push -q "$name" "docker-archive:$tar.tmp:$name" >/dev/null
    mv "$tar.tmp" "$tar"
  fi
  printf '%s\t%s\n' "$name" "$tar" >>"$out/list.tmp"
}
# built KEYNAME KEY IMAGE: the image exists and was built from inputs with this key.
built() { [ -f "$out/$1.key" ] && [ "$(cat "$out/$1.key")" = "$2" ] && have_image "$3"; }
: >"$out/list.tmp"

# --- pause --------------------------------------------------------------------------------------
pause=registry.k8s.io/pause:$(cat "$k8s/pause.tag")
k=$(printf '%s %s\n' "$pause" "$(key "$k8s/pause.c" "$0")" | sha256sum | cut -c1-16)
if ! built pause "$k" "$pause"; then
  log "pause from $k8s/pause.c"
  tmp=$(mktemp -d)
  gcc -Os -static -o "$tmp/pause" "$k8s/pause.c"
  strip "$tmp/pause" || true
  c=$(buildah from scratch)
  buildah copy -q "$c" "$tmp/pause" /pause >/dev/null
  buildah config --entrypoint '["/pause"]' --user 65535:65535 "$c"
  buildah commit -q --rm "$c" "$pause" >/dev/null
  rm -rf "$tmp"
  echo "$k" >"$out/pause.key"
fi
save "$pause" "$k"

# --- node:24-bookworm-slim stand-in ---------------------------------------------------------------
base=docker.io/library/node:24-bookworm-slim
node_ver=$("$node_bin" --version)
k=$(printf '%s %s\n' "$node_ver" "$(key "$0" "$ca_bundle")" | sha256sum | cut -c1-16)
if ! built base "$k" "$base"; then
  # The machine's own Debian mirror (never a hard-coded host).
  mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null ||
    awk '/^deb /{print $2; exit}' /etc/apt/sources.list)
  [ -n "$mirror" ] || mirror=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list)
  rootfs="$cache/base-rootfs"
  if [ ! -f "$rootfs/.complete" ]; then
    log "debootstrap --variant=minbase bookworm from $mirror (about a minute)"
    rm -rf "$rootfs"
    debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
      { tail -20 "$cache/debootstrap.log" >&2; exit 1; }
    rm -rf "$rootfs/var/cache/apt/archives"/*.deb "$rootfs/var/lib/apt/lists"/*
    touch "$rootfs/.complete"
  fi
  log "node:24-bookworm-slim stand-in ($node_ver + npm)"
  c=$(buildah from scratch)
  mnt=$(buildah mount "$c")
  tar -C "$rootfs" --exclude=./.complete -cf - . | tar -C "$mnt" -xf -
  install -m 0755 "$node_bin" "$mnt/usr/local/bin/node"
  # npm from the registry into the image's /usr/local, as the official image has it.
  PATH="$(dirname "$node_bin"):$PATH" npm install --global --prefix "$mnt/usr/local" --no-audit --no-fund \
    --loglevel=error npm@11 >&2
  # This machine reaches the registries through an egress proxy whose CA is in its system bundle;
  # without it `npm ci` inside a build hangs. Only this local stand-in carries it, never the product.
  mkdir -p "$mnt/etc/ssl/certs" && cp "$ca_bundle" "$mnt/etc/ssl/certs/ca-certificates.crt"
  buildah umount "$c" >/dev/null
  buildah config --env NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt --env NODE_VERSION="${node_ver#v}" \
    --cmd '["node"]' --label drainguard.lab/stand-in=node:24-bookworm-slim "$c"
  buildah commit -q --rm "$c" "$base" >/dev/null
  echo "$k" >"$out/base.key"
fi
save "$base" "$k"
base_key=$k

# --- drainguard:dev from the repo's Dockerfile, unchanged ---------------------------------------
# The build context's content: every file git tracks or would track (the Dockerfile's own
# .dockerignore decides what enters the image; a changed ignored file only costs a rebuild).
ctx_key() {
  (cd "$here" && git ls-files -co --exclude-standard -z -- "$@" | sort -z | xargs -0 -r sha256sum) |
    sha256sum | cut -c1-16
}
bud() { # NAME KEYNAME KEY DOCKERFILE
  if ! built "$2" "$3" "$1"; then
    log "$1 (buildah bud $4)"
    (cd "$here" && buildah bud -q --pull=false --network host --layers -f "$4" -t "$1" . >&2)
    echo "$3" >"$out/$2.key"
  fi
  save "$1" "$3"
}
app=docker.io/library/drainguard:dev
k=$(printf '%s %s\n' "$base_key" "$(ctx_key ':!test' ':!docs' ':!lab' ':!demo')" | sha256sum | cut -c1-16)
bud "$app" app "$k" Dockerfile

lab=docker.io/library/drainguard-lab:dev
k=$(printf '%s %s\n' "$base_key" "$(ctx_key lab shared package.json package-lock.json)" | sha256sum | cut -c1-16)
bud "$lab" lab "$k" lab/sim/image/Dockerfile

# --- the list the cluster imports, with sizes ---------------------------------------------------
"$node_bin" -e '
const fs = require("fs");
const rows = fs.readFileSync(process.argv[1], "utf8").trim().split("\n").map((l) => l.split("\t"));
const images = rows.map(([name, tar]) => ({ name, tar, bytes: fs.statSync(tar).size }));
fs.writeFileSync(process.argv[2], JSON.stringify({ images }, null, 2) + "\n");
for (const i of images) console.log(`${i.name.padEnd(42)} ${(i.bytes / 1048576).toFixed(1).padStart(7)} MiB`);
' "$out/list.tmp" "$out/images.json" 2>/dev/null || "$node_bin" -e '0'
rm -f "$out/list.tmp"
echo "$out/images.json"
