# Lease handover (issue 5): benchmark; its e2e tests run under `make test`.
## make bench-lease  Lease handover vs. expiry baseline, 10 trials each (takes ~1-2 min); last line JSON
.PHONY: bench-lease
bench-lease: bootstrap
	$(RUN) node test/bench/lease/handover.ts
