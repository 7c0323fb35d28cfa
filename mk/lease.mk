# Lease handover: its benchmark (figures in docs/lease-handover.md); its tests run in `make test`'s
# main lane.
## make bench-lease    Lease handover vs. expiry baseline, 10 trials each (takes ~1-2 min); last line JSON
.PHONY: bench-lease
bench-lease: bootstrap
	$(RUN) node test/bench/lease/handover.ts
