# The robustness suite (issue 24; docs/robustness.md): randomized faults during drains on the lab
# cluster, invariants checked from the outside. Its short fixed-seed run is in make test
# (test/e2e/cluster/robustness.test.ts).
.PHONY: robustness
## make robustness     lab cluster: TRIALS= trials (default 20) of a drain or pod deletion under random faults, invariants checked; SEED= to repeat a run, TRIAL= to replay one trial; STOP_AFTER_MIN= a time budget, FROM= (same SEED, OUT) continues a run cut short; CONTROL_PLANES=3 on the HA lab (adds the stale API server); SCRIPTED= one trial written by hand (test/robustness/scripted.ts); last line JSON
robustness: bootstrap build
	$(RUN) SEED="$(SEED)" TRIALS="$(TRIALS)" FROM="$(FROM)" STOP_AFTER_MIN="$(STOP_AFTER_MIN)" TRIAL="$(TRIAL)" OUT="$(OUT)" KEEP_LOGS="$(KEEP_LOGS)" CONTROL_PLANES="$(CONTROL_PLANES)" SCRIPTED="$(SCRIPTED)" node test/robustness/run.ts
