# The Helm chart (charts/drainguard): its offline tests and a package. helm 4.1.4 / 3.17.2 and
# promtool come from scripts/helm-tools.sh (bootstrap).
.PHONY: helm-test helm-package
## make helm-test      the chart's tests: helm lint --strict (helm 4 and 3), schema, kustomize equivalence, alerts
helm-test: bootstrap
	$(RUN) node scripts/test.ts --lane main test/unit/helm/
## make helm-package   package the chart into dist/charts/ (helm 4)
helm-package: bootstrap
	"$$(bash scripts/helm-tools.sh helm4)" package charts/drainguard --destination dist/charts
