# Admission webhook: its benchmark (figures in docs/webhook.md).
.PHONY: bench-webhook
## make bench-webhook  AdmissionReview rps and p50/p99 over TLS (64 conns) vs a bare fastify route; last line JSON
bench-webhook: bootstrap
	$(RUN) node test/bench/webhook/admission.ts
