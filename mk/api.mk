# What sidecars cost the API server (figures in docs/operations.md, "What a sidecar costs the API server").
.PHONY: bench-api
## make bench-api      N sidecars (real code, in-cluster path, observe-only) vs a real API server with churn; audit-log counts per sidecar-hour, API server CPU/RSS per N; N=100,250,500,1000 MINUTES=10 (steady window per N); last line JSON

bench-api: bootstrap build
	$(RUN) N="$(N)" MINUTES="$(MINUTES)" WARMUP_MINUTES="$(WARMUP_MINUTES)" COMPARE="$(COMPARE)" PROFILE_N="$(PROFILE_N)" node test/bench/api/bench.ts
