# L2 handover: its tests alone, and its benchmarks (figures in docs/l2-handover.md).
.PHONY: bench-l2 bench-sidecar test-l2
## make test-l2        L2 handover unit and end-to-end tests (network namespaces, real API server)
## make bench-l2       ARP/NDP probes of VIPs: cordon/frozen-API/crash, IPv6 and dual-stack on the bed (namespaces + bare API server), kubectl drain/delete pod on real kubelets; last line JSON
## make bench-sidecar  sidecar footprint (RSS, time to ready) next to a bare node; last line JSON

test-l2: bootstrap
	$(RUN) node scripts/test.ts test/unit/sidecar/l2/ test/e2e/l2/

bench-l2: bootstrap
	$(RUN) node test/bench/l2/handover.ts

bench-sidecar: bootstrap build
	$(RUN) node test/bench/l2/sidecar-footprint.ts
