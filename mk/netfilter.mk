# Netfilter cleanup: a benchmark of one deleting pass against per-rule exec (figures in
# docs/netfilter-cleanup.md), and its tests alone.
.PHONY: bench-cleanup test-netfilter
## make bench-cleanup  netfilter cleanup: 1,000 pods, 2,000 stale + 500 protected ebtables rules; batch pass vs per-rule exec (root)
bench-cleanup: bootstrap
	$(RUN) node test/bench/netfilter/cleanup.ts

## make test-netfilter netfilter cleanup unit and end-to-end tests only (root: real network namespaces)
test-netfilter: bootstrap
	$(RUN) node scripts/test.ts test/unit/sidecar/netfilter/ test/e2e/netfilter/
