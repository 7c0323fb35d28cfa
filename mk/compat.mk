# The supported Kubernetes range's floor (lab/versions.env KUBERNETES_COMPAT_VERSION): every
# end-to-end test (the bed's and the lab cluster's) on that version, built from the Go module proxy
# like the default one. Outside `make test`: a second Kubernetes build costs ~15 min cold.
.PHONY: test-compat
## make test-compat    every end-to-end test on the supported range's floor (KUBE=<version> for another)
test-compat: bootstrap build
	@v="$${KUBE:-$$(sed -n 's/^KUBERNETES_COMPAT_VERSION=//p' lab/versions.env)}"; \
	bash scripts/build-upstream.sh kubernetes "$$v" >/dev/null && \
	LAB_KUBERNETES_VERSION="$$v" $(RUN) node scripts/test.ts test/e2e/
