# The report drainguard was written for, replayed on the HA lab (issue 23; figures in
# docs/l2-handover.md, "A stale API server: the seed sequence").
.PHONY: bench-seed
## make bench-seed     HA lab (3 control planes, API VIP by MetalLB L2): drain the VIP owner through the VIP, remove its etcd member, node gone; ARP + API via the VIP without/with drainguard, and with the member removed at the cordon (~10 min; ETCD_LEADER=drained: its member leads etcd first); last line JSON
bench-seed: bootstrap build
	$(RUN) GONE_AFTER_S="$(GONE_AFTER_S)" WATCH_S="$(WATCH_S)" ETCD_LEADER="$(ETCD_LEADER)" node test/bench/seed/seed.ts
