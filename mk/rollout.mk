# What injection costs a DaemonSet rollout on the lab cluster (figures in docs/operations.md).
## make bench-rollout  speaker DaemonSet rollout restart with and without the sidecar on real kubelets: s per node, sidecar time to ready, idle RSS; ROUNDS=2; last line JSON
.PHONY: bench-rollout
bench-rollout: bootstrap build
	$(RUN) node test/bench/rollout/rollout.ts
