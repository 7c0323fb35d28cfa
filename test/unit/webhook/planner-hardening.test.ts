// Security review (issue 13, items 1–3): privilege, annotation values and the service-account token,
// decided by the pure planner on plain data.
import t, { type Test } from 'tap';
import { baseOptions } from '../../../lab/fake/webhook.ts';
import { plan } from '../../../webhook/plan/index.ts';
import type { AdmissionRequestLike, Plan } from '../../../webhook/plan/step.ts';
import { skupperPod, speakerPod } from './fixtures.ts';

// biome-ignore lint/suspicious/noExplicitAny: tests edit arbitrary pod JSON
type Obj = Record<string, any>;

const req = (pod: Obj, namespace = 'metallb-system'): AdmissionRequestLike => ({
  operation: 'CREATE',
  kind: { group: '', version: 'v1', kind: 'Pod' },
  namespace,
  object: pod,
});
const edit = (pod: Obj, f: (p: Obj) => void): Obj => {
  f(pod);
  return pod;
};
const annotate = (pod: Obj, a: Record<string, string>) =>
  edit(pod, (p) => {
    p.metadata.annotations = { ...(p.metadata.annotations ?? {}), ...a };
  });
const denied = (t: Test, p: Plan): string => {
  t.equal(p.allowed, false, 'expected a denial');
  return p.allowed ? '' : p.message;
};
// biome-ignore lint/suspicious/noExplicitAny: the patch values are pod JSON
const sidecarOf = (t: Test, p: Plan): any => {
  t.ok(p.allowed);
  if (!p.allowed) throw new Error('expected an allowed plan');
  const op = p.patch.find(
    (o) => o.path.startsWith('/spec/initContainers') || o.path === '/spec/containers/-',
  );
  const v = op?.value;
  return Array.isArray(v) ? v[0] : v;
};

t.test(
  'item 1: the L2 profile by annotation off the host network is denied, naming hostNetwork',
  async (t) => {
    const pod = annotate(skupperPod(), { 'drainguard.io/profile': 'metallb-speaker' });
    const msg = denied(t, plan(req(pod, 'apps'), baseOptions()));
    t.match(msg, /hostNetwork/);
    t.match(msg, /metallb-speaker/);
  },
);

t.test('item 1: a speaker-labelled pod off the host network is denied too', async (t) => {
  const pod = edit(speakerPod(), (p) => {
    delete p.spec.hostNetwork;
  });
  t.match(denied(t, plan(req(pod), baseOptions())), /spec\.hostNetwork: true/);
});

t.test(
  'item 1: NET_ADMIN only with a netfilter or fence feature; seccomp RuntimeDefault always',
  async (t) => {
    const l2 = sidecarOf(t, plan(req(speakerPod()), baseOptions()));
    t.strictSame(l2.securityContext.capabilities.add, ['NET_ADMIN']);
    t.strictSame(l2.securityContext.seccompProfile, { type: 'RuntimeDefault' });
    const lease = sidecarOf(t, plan(req(skupperPod(), 'site'), baseOptions()));
    t.equal(lease.securityContext.capabilities.add, undefined);
    t.equal(lease.securityContext.runAsNonRoot, true);
    t.strictSame(lease.securityContext.seccompProfile, { type: 'RuntimeDefault' });
  },
);

t.test(
  "item 1: the webhook's own namespace is never injected, whatever the configuration says",
  async (t) => {
    const p = plan(req(skupperPod(), 'dg-ns'), baseOptions({ ownNamespace: 'dg-ns' }));
    t.equal(p.allowed && p.outcome, 'excluded-namespace');
    // Also when excludedNamespaces is given without it.
    const q = plan(
      req(skupperPod(), 'dg-ns'),
      baseOptions({ ownNamespace: 'dg-ns', excludedNamespaces: [] }),
    );
    t.equal(q.allowed && q.outcome, 'excluded-namespace');
    const k = plan(req(skupperPod(), 'kube-system'), baseOptions({ ownNamespace: 'dg-ns' }));
    t.equal(k.allowed && k.outcome, 'excluded-namespace');
  },
);

t.test('item 2: l2-interfaces must be valid Linux interface names', async (t) => {
  for (const bad of ['eth0/1', 'a'.repeat(16), 'eth 0', 'eth:0', '..', 'eth0,', 'eth0,,eth1']) {
    const msg = denied(
      t,
      plan(req(annotate(speakerPod(), { 'drainguard.io/l2-interfaces': bad })), baseOptions()),
    );
    t.match(msg, /^drainguard\.io\/l2-interfaces=/, bad);
    t.match(msg, /15 characters/, bad);
  }
  const ok = plan(
    req(annotate(speakerPod(), { 'drainguard.io/l2-interfaces': 'eth0,bond0.100' })),
    baseOptions(),
  );
  t.equal(ok.allowed, true);
});

t.test("item 2: memberlist-ports only among the guarded container's declared ports", async (t) => {
  for (const bad of ['6443', '10250', '7946,6443']) {
    const msg = denied(
      t,
      plan(req(annotate(speakerPod(), { 'drainguard.io/memberlist-ports': bad })), baseOptions()),
    );
    t.match(msg, /^drainguard\.io\/memberlist-ports=/, bad);
    t.match(msg, /declared by container speaker: 7472, 7946/, bad);
  }
  const ok = plan(req(annotate(speakerPod(), { 'drainguard.io/memberlist-ports': '7946' })), baseOptions());
  t.equal(ok.allowed, true);
});

t.test('item 2: metallb-namespace must be a DNS-1123 label', async (t) => {
  for (const bad of ['../../api', 'Metallb', 'a'.repeat(64), 'ns/x', '-ns']) {
    const msg = denied(
      t,
      plan(req(annotate(speakerPod(), { 'drainguard.io/metallb-namespace': bad })), baseOptions()),
    );
    t.match(msg, /^drainguard\.io\/metallb-namespace=/, bad);
    t.match(msg, /DNS-1123 label/, bad);
  }
});

t.test(
  'item 2: Lease names are DNS-1123 subdomains (≤ 253), namespaces DNS-1123 labels (≤ 63)',
  async (t) => {
    const withLeases = (v: string) =>
      annotate(
        edit(skupperPod(), (p) => {
          p.metadata.labels = {};
        }),
        { 'drainguard.io/leases': v, 'drainguard.io/leader-container': 'router' },
      );
    for (const bad of ['a'.repeat(254), `${'n'.repeat(64)}/lease`, 'a..b', 'x/y/z', 'Lease']) {
      const msg = denied(t, plan(req(withLeases(bad), 'apps'), baseOptions()));
      t.match(msg, /^drainguard\.io\/leases=/, bad);
      t.match(msg, /DNS-1123/, bad);
    }
    t.equal(plan(req(withLeases(`ns/${'a'.repeat(253)}`), 'apps'), baseOptions()).allowed, true);
  },
);

t.test('item 3: automountServiceAccountToken: false is denied, naming the setting', async (t) => {
  const pod = edit(skupperPod(), (p) => {
    p.spec.automountServiceAccountToken = false;
  });
  const msg = denied(t, plan(req(pod, 'site'), baseOptions()));
  t.match(msg, /spec\.automountServiceAccountToken: false/);
  t.match(msg, /drainguard\.io\/inject=disabled/);
  const on = edit(skupperPod(), (p) => {
    p.spec.automountServiceAccountToken = true;
  });
  t.equal(plan(req(on, 'site'), baseOptions()).allowed, true);
});
