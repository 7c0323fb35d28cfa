# The demo: one command on a fresh machine (bootstrap installs what is missing) shows a whole drain,
# measured from the outside.
## make demo           a drain on one machine: webhook, L2 + Lease handover, netfilter cleanup, measured; prints report: PATH
.PHONY: demo
demo: bootstrap
	@$(RUN) node demo/run.ts
