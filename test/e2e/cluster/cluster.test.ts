// The lab-cluster tier: real kubelets on containerd, controllers, our images. One cluster for
// all suites, in this order: the proof that it is a real cluster (and the webhook install),
// then MetalLB L2, the Lease handover and the netfilter cleanup on it.
import t from 'tap';
import './proof.ts';
import './l2-flows.ts';
import './lease-flows.ts';
import './netfilter-flow.ts';
import { stopCluster } from './shared.ts';

t.teardown(stopCluster);
