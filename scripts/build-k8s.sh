#!/usr/bin/env bash
# Builds the Kubernetes 1.20.2 binaries a local cluster needs (kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, kube-proxy) from Debian's `kubernetes` source
# package (vendored, builds offline with Debian's Go) in one `make` call, and caches them with the
# source tree's pause.c (for the pause image). Prints the cache directory.
# A cache made by the old apiserver-only script (kube-apiserver-1.20.2) is not reused: built once more.
set -euo pipefail
ver="1.20.2"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/drainguard"
out="$cache/k8s-$ver"
bins=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)
# The stamp marks a complete build with the reflect2 fix below; anything else is rebuilt.
stamp="$out/.complete-reflect2-go118-hiter"
if [ -f "$stamp" ]; then echo "$out"; exit 0; fi
log() { printf '[build-k8s] %s\n' "$*" >&2; }
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
(cd "$work" && apt-get "${apt_opts[@]}" source --download-only kubernetes >&2)
ls "$work"/kubernetes_*really${ver}.orig.tar.* >/dev/null 2>&1 || {
  echo "[build-k8s] the kubernetes source package is not ${ver} (Debian 12 ships 1.20.5+really${ver})" >&2
  exit 1
}
orig=$(ls "$work"/kubernetes_*really${ver}.orig.tar.* | head -1)
log "unpacking $(basename "$orig")"
mkdir -p "$work/tree" && tar -xf "$orig" -C "$work/tree" --strip-components=1
cd "$work/tree"
rm -rf _output
# Kubernetes 1.20 vendors modern-go/reflect2 1.0.1, whose map iteration calls reflect.mapiterinit
# with the pre-Go-1.18 signature; built with Debian's Go 1.19 the API server then dies with
# "fatal error: fault" on the first custom-resource write (json-iterator sorts map keys through it).
# Apply reflect2 1.0.2's fix: the caller passes the iterator (go1.18+ signature).
python3 - vendor/github.com/modern-go/reflect2 <<'PY'
import re, sys, pathlib
d = pathlib.Path(sys.argv[1])
link, umap = d / "unsafe_link.go", d / "unsafe_map.go"
a = link.read_text()
b = umap.read_text()
a2 = re.sub(r"(//[^\n]*\n)*//go:linkname mapiterinit reflect\.mapiterinit\nfunc mapiterinit\([^)]*\) \*hiter\n", "", a)
b2 = re.sub(r"func \(type2 \*UnsafeMapType\) UnsafeIterate\(obj unsafe\.Pointer\) MapIterator \{\n.*?\n\}\n", "", b, flags=re.S)
if a2 == a or b2 == b:
    sys.exit("reflect2 patch did not apply: unsafe_link.go/unsafe_map.go have an unexpected shape")
# 1.0.1's hiter declares only key/value ("rest fields are ignored"): with the caller now owning
# the iterator it must have the runtime's full layout, or mapiterinit writes past it.
a3 = re.sub(r"type hiter struct \{\n.*?\n\}\n", '''type hiter struct {
	key         unsafe.Pointer
	value       unsafe.Pointer
	t           unsafe.Pointer
	h           unsafe.Pointer
	buckets     unsafe.Pointer
	bptr        unsafe.Pointer
	overflow    *[]unsafe.Pointer
	oldoverflow *[]unsafe.Pointer
	startBucket uintptr
	offset      uint8
	wrapped     bool
	B           uint8
	i           uint8
	bucket      uintptr
	checkBucket uintptr
}
''', a2, flags=re.S)
if a3 == a2:
    sys.exit("reflect2 patch did not apply: no hiter struct in unsafe_link.go")
a2 = a3
link.write_text(a2)
umap.write_text(b2)
(d / "go_above_118.go").write_text("""//go:build go1.18
// +build go1.18

package reflect2

import "unsafe"

// m escapes into the return value, but the caller of mapiterinit
// doesn't let the return value escape.
//go:noescape
//go:linkname mapiterinit reflect.mapiterinit
func mapiterinit(rtype unsafe.Pointer, m unsafe.Pointer, it *hiter)

func (type2 *UnsafeMapType) UnsafeIterate(obj unsafe.Pointer) MapIterator {
	var it hiter
	mapiterinit(type2.rtype, *(*unsafe.Pointer)(obj), &it)
	return &UnsafeMapIterator{
		hiter:      &it,
		pKeyRType:  type2.pKeyRType,
		pElemRType: type2.pElemRType,
	}
}
""")
PY
mkdir -p .go/src/k8s.io && ln -sfn ../../.. .go/src/k8s.io/kubernetes
log "building ${bins[*]} (10-15 min on 2 cores)"
GOPATH="$PWD/.go" CGO_ENABLED=0 make WHAT="${bins[*]/#/cmd/}" >&2
rm -rf "$out.tmp" && mkdir -p "$out.tmp"
for b in "${bins[@]}"; do cp "_output/local/bin/linux/amd64/$b" "$out.tmp/"; done
cp build/pause/linux/pause.c "$out.tmp/pause.c"
touch "$out.tmp/$(basename "$stamp")"
rm -rf "$out" && mv "$out.tmp" "$out"
# The old script's single binary, if any, is superseded.
rm -f "$cache/kube-apiserver-$ver" "$cache/kube-apiserver-$ver.reflect2-go118-hiter"
cd / && rm -rf "$work"
echo "$out"
