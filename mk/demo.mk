# The demo (issue 7): one command on a fresh machine; bootstrap installs what is missing.
## make demo         a drain on one machine: webhook, L2 + Lease handover, netfilter cleanup, measured; prints report: PATH
.PHONY: demo
demo: bootstrap
	@$(RUN) node demo/run.ts
