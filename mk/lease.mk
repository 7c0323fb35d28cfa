# Lease handover: its benchmark (figures in docs/lease-handover.md); its tests run in `make test`.

## make bench-lease    Lease handover vs. expiry baseline, 10 trials each (takes ~1-2 min); last line JSON
.PHONY: bench-lease
bench-lease: bootstrap
	$(RUN) node test/bench/lease/handover.ts

## make bench-lease-procs    Cost of the leader-stop check (and the speaker's guarded-container poll) in a busy shared PID namespace vs. a full /proc scan; last line JSON
.PHONY: bench-lease-procs
bench-lease-procs: bootstrap
	$(RUN) node test/bench/lease/leader-stop-check.ts
