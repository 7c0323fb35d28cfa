// The lease candidate simulator as a container's process, for pods on the lab cluster: skupper's
// kube-adaptor runs client-go leader election with its hostname (the pod name) as identity and the
// pod's service account, with ReleaseOnCancel set but a context that is never cancelled: on SIGTERM
// it exits without releasing. A leader that loses the Lease releases it if it still sees itself as
// holder, then runs the election again after skupper's backoff (the simulator's defaults).
// With $LEASE_IDENTITY set (the downward API's spec.nodeName) it runs under that identity instead,
// as kube-vip does under its node name (vip_nodename): two pods on one node then share it.
//   node lab/sim/lease-candidate-pod.ts <lease name>
// stdout: JSON lines {"ev":"leading"|"stopped-leading","identity","t"} (epoch ms), for tests.
import { hostname } from 'node:os';
import { KubeClient } from '../../shared/kube/client.ts';
import { kubeconfigAuth } from '../../shared/kube/kubeconfig.ts';
import { LeaseCandidate } from './lease-candidate.ts';

const lease = process.argv[2] ?? 'skupper-site-leader';
const namespace = process.env.POD_NAMESPACE;
if (!namespace) throw new Error('lease-candidate-pod: $POD_NAMESPACE is required (downward API)');
const identity = process.env.LEASE_IDENTITY || hostname();
const emit = (o: Record<string, unknown>) => process.stdout.write(`${JSON.stringify({ identity, ...o })}\n`);
const client = new KubeClient(kubeconfigAuth({}), {
  userAgent: `lease-candidate/${identity}`,
});
const candidate: LeaseCandidate = new LeaseCandidate({
  client,
  namespace,
  lease,
  identity,
  log: (msg, fields) => {
    if (msg.startsWith('leader work started'))
      emit({ ev: 'leading', t: candidate.intervals.at(-1)?.start ?? Date.now() });
    else if (msg === 'leader work ended') emit({ ev: 'stopped-leading', t: Date.now(), by: fields.by });
    else emit({ ev: 'log', msg, ...fields });
  },
});
candidate.start();
emit({ ev: 'candidate', t: Date.now() });
// Leader work ends with the signal, and the process goes at once, as a Go binary does on SIGTERM
// with the elector's context never cancelled: no release, nothing awaited (an in-flight renew
// could otherwise hold the exit for up to the renew deadline).
process.once('SIGTERM', () => {
  void candidate.stop().catch(() => {});
  process.exit(0);
});
