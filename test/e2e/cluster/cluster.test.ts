// The lab-cluster tier: real kubelets on containerd, controllers, our images. One cluster for
// all suites, in this order: that it is a real cluster (real-cluster.ts, with the webhook
// install), then MetalLB L2, the chart's node guard, the Lease handover, a surge rollout under the
// node-name identity and the netfilter cleanup on it.
import t from 'tap';
import './real-cluster.ts';
import './l2-flows.ts';
import './node-guard-flow.ts';
import './lease-flows.ts';
import './surge-flow.ts';
import './netfilter-flow.ts';
import { stopCluster } from './shared.ts';

t.teardown(stopCluster);
