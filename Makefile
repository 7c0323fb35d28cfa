# drainguard — every target bootstraps what it needs (idempotent, cached outside the repo).
SHELL := /bin/bash
.DEFAULT_GOAL := help
NODE_BIN_DIR = $(shell dirname "$$(bash scripts/node24.sh)")
RUN = PATH="$(NODE_BIN_DIR):$$PATH"
# When make started (a cold bootstrap compiles for many minutes): CI cuts a run off at 90 minutes
# without a summary, so `make test` stops its lanes at 86 and prints one (scripts/test.ts --stop-at).
STARTED := $(shell date +%s)

.PHONY: help bootstrap lint typecheck test test-unit test-e2e coverage build image cluster cluster-down
help:
	@echo "make test           bootstrap, lint, typecheck, unit and end-to-end tests (tap)"
	@echo "make bootstrap      install what the tests need (apt, Node 24, npm, upstream builds; cached)"
	@echo "make lint           biome check (lint and format)"
	@echo "make typecheck      tsc --noEmit"
	@echo "make test-unit      the unit tests only"
	@echo "make test-e2e       the end-to-end tests only (every lane)"
	@echo "make coverage       the main lane with tap's coverage; line coverage of webhook/ sidecar/ shared/ cli/"
	@echo "make build          bundle the CLI (./bin/drainguard)"
	@echo "make image          build the pause, node stand-in, drainguard:dev and drainguard-lab:dev images (buildah)"
	@echo "make cluster        a local cluster: control plane + node-a..c (kubelet, containerd); prints KUBECONFIG=..."
	@echo "make cluster-down   stop it and remove everything it made"
	@grep -hE '^## ' mk/*.mk 2>/dev/null | sed 's/^## //' || true

bootstrap:
	@bash scripts/bootstrap.sh

lint: bootstrap
	$(RUN) npx biome check .

typecheck: bootstrap
	$(RUN) npx tsc --noEmit

test-unit: bootstrap
	$(RUN) node scripts/test.ts --lane main test/unit/

test-e2e: bootstrap build
	$(RUN) node scripts/test.ts test/e2e/

# tap runs every test, in three lanes side by side (scripts/test.ts): the unit and L2 handover
# files, the other bed files, and the lab-cluster files; one summary counts every test.
test: bootstrap lint typecheck build
	$(RUN) node scripts/test.ts --stop-at $$(( $(STARTED) + 86 * 60 ))

# The main lane again with tap's coverage on, then line coverage per product directory.
coverage: bootstrap build
	$(RUN) node scripts/test.ts --coverage
	$(RUN) node scripts/coverage.ts

build: bootstrap
	$(RUN) node scripts/bundle.ts

image: bootstrap
	@bash scripts/build-images.sh

cluster: bootstrap
	@$(RUN) node scripts/cluster.ts up

cluster-down:
	@$(RUN) node scripts/cluster.ts down

# Feature targets (benchmarks, demo) live in mk/*.mk, one file per feature.
-include mk/*.mk
