// The standalone DaemonSet overlay: it renders, the API server accepts it, and its service
// account can do exactly what the sidecar with only netfilter-cleanup needs.
import t from 'tap';
import { type ControlPlane, sharedControlPlane } from '../../../lab/bed/control-plane.ts';

const overlay = 'manifests/overlays/netfilter-cleanup-daemonset';
const sa = 'system:serviceaccount:drainguard-netfilter:drainguard-netfilter-cleanup';

t.test('manifests/overlays/netfilter-cleanup-daemonset', async (t) => {
  let cp: ControlPlane;
  let rendered: string;
  t.before(async () => {
    cp = await sharedControlPlane();
    const r = await cp.kubectl(['kustomize', overlay]);
    t.equal(r.code, 0, r.stderr);
    rendered = r.stdout;
  });

  t.test('renders a hostNetwork DaemonSet with NET_ADMIN only, probes on loopback', async (t) => {
    t.match(rendered, /kind: DaemonSet/);
    t.match(rendered, /hostNetwork: true/);
    t.match(rendered, /add:\n\s+- NET_ADMIN\n/);
    t.match(rendered, /drop:\n\s+- ALL\n/);
    t.match(rendered, /value: netfilter-cleanup/);
    t.match(rendered, /host: 127\.0\.0\.1/);
    t.notMatch(rendered, /privileged: true/);
    t.match(rendered, /drainguard\.io\/inject: disabled/);
    // The one privileged workload, in a namespace of its own that Pod Security admits it to.
    t.match(rendered, /kind: Namespace\n {2}metadata:|kind: Namespace\nmetadata:/);
    t.match(rendered, /name: drainguard-netfilter\n/);
    t.match(rendered, /pod-security\.kubernetes\.io\/enforce: privileged/);
    t.notMatch(rendered, /namespace: drainguard-system/);
  });

  t.test('is accepted by the API server, and RBAC grants exactly what the sidecar needs', async (t) => {
    const apply = await cp.kubectl(['apply', '-f', '-'], { input: rendered });
    t.equal(apply.code, 0, apply.stderr);
    const can = async (verb: string, resource: string, ns?: string) =>
      (
        await cp.kubectl(['auth', 'can-i', verb, resource, '--as', sa, ...(ns ? ['-n', ns] : [])])
      ).stdout.trim();
    t.equal(await can('list', 'pods'), 'yes');
    t.equal(await can('watch', 'pods'), 'yes');
    t.equal(await can('get', 'nodes'), 'yes');
    t.equal(await can('create', 'events', 'default'), 'yes');
    t.equal(await can('delete', 'pods'), 'no');
    t.equal(await can('patch', 'nodes'), 'no');
    t.equal(await can('get', 'secrets', 'drainguard-system'), 'no');
  });
});
