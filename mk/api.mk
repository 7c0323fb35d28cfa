# What sidecars cost the API server (figures in docs/operations.md, "What a sidecar costs the API server").
.PHONY: bench-api
## make bench-api      N sidecars (real code, in-cluster path, observe-only) vs a real API server + audit log + churn: requests/re-lists/410s per sidecar-hour, API server CPU/RSS per N, one drain among DRAIN Nodes (peak RSS in the injected limit, wide lists, cordon→fence); N=100,250,500,1000 MINUTES=10 DRAIN=1000,5000 (0 skips) DRAIN_CONFIRM=0 (nobody takes over); over an hour; last line JSON

bench-api: bootstrap build
	$(RUN) N="$(N)" MINUTES="$(MINUTES)" DRAIN="$(DRAIN)" DRAIN_CONFIRM="$(DRAIN_CONFIRM)" WARMUP_MINUTES="$(WARMUP_MINUTES)" COMPARE="$(COMPARE)" PROFILE_N="$(PROFILE_N)" node test/bench/api/bench.ts
