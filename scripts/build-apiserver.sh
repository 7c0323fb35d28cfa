#!/usr/bin/env bash
# Builds kube-apiserver 1.20.2 from Debian's `kubernetes` source package (vendored, builds
# offline with Debian's Go) and caches it; prints the binary's path. See shared local-cluster notes.
set -euo pipefail
ver="1.20.2"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/drainguard"
out="$cache/kube-apiserver-$ver"
if [ -x "$out" ]; then echo "$out"; exit 0; fi
log() { printf '[build-apiserver] %s\n' "$*" >&2; }
work="$cache/k8s-src-$ver"
rm -rf "$work" && mkdir -p "$work/lists/partial" "$work/sources"
# deb-src entry derived from the machine's own apt sources (same URIs, never a hard-coded mirror).
src_file=/etc/apt/sources.list.d/debian.sources
if [ -f "$src_file" ]; then
  sed -e 's/^Types:.*/Types: deb-src/' "$src_file" >"$work/sources/src.sources"
else
  grep -E '^deb ' /etc/apt/sources.list | sed 's/^deb /deb-src /' >"$work/sources/src.list"
fi
apt_opts=(-o "Dir::Etc::SourceParts=$work/sources" -o "Dir::Etc::SourceList=/dev/null" -o "Dir::State::Lists=$work/lists" -o "Debug::NoLocking=1")
log "fetching source lists"
apt-get "${apt_opts[@]}" update -qq >&2
log "downloading kubernetes source package"
(cd "$work" && apt-get "${apt_opts[@]}" source --download-only "kubernetes=1.20.5+really1.20.2*" >&2 || apt-get "${apt_opts[@]}" source --download-only kubernetes >&2)
orig=$(ls "$work"/kubernetes_*.orig.tar.* | head -1)
log "unpacking $(basename "$orig")"
mkdir -p "$work/tree" && tar -xf "$orig" -C "$work/tree" --strip-components=1
cd "$work/tree"
rm -rf _output
mkdir -p .go/src/k8s.io && ln -sfn ../../.. .go/src/k8s.io/kubernetes
log "building (several minutes on 2 cores)"
GOPATH="$PWD/.go" CGO_ENABLED=0 make WHAT=cmd/kube-apiserver >&2
cp _output/local/bin/linux/amd64/kube-apiserver "$out.tmp" && mv "$out.tmp" "$out"
cd / && rm -rf "$work"
echo "$out"
