// The standalone DaemonSet overlay: it renders, the API server accepts it, and its service
// account can do exactly what the sidecar with only netfilter-cleanup needs.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { type ControlPlane, sharedControlPlane } from '../../../lab/control-plane.ts';

const overlay = 'manifests/overlays/netfilter-cleanup-daemonset';
const sa = 'system:serviceaccount:drainguard-netfilter:drainguard-netfilter-cleanup';

describe('manifests/overlays/netfilter-cleanup-daemonset', () => {
  let cp: ControlPlane;
  let rendered: string;
  before(async () => {
    cp = await sharedControlPlane();
    const r = await cp.kubectl(['kustomize', overlay]);
    assert.equal(r.code, 0, r.stderr);
    rendered = r.stdout;
  });

  it('renders a hostNetwork DaemonSet with NET_ADMIN only, probes on loopback', () => {
    assert.match(rendered, /kind: DaemonSet/);
    assert.match(rendered, /hostNetwork: true/);
    assert.match(rendered, /add:\n\s+- NET_ADMIN\n/);
    assert.match(rendered, /drop:\n\s+- ALL\n/);
    assert.match(rendered, /value: netfilter-cleanup/);
    assert.match(rendered, /host: 127\.0\.0\.1/);
    assert.doesNotMatch(rendered, /privileged: true/);
    assert.match(rendered, /drainguard\.io\/inject: disabled/);
    // The one privileged workload, in a namespace of its own that Pod Security admits it to.
    assert.match(rendered, /kind: Namespace\n {2}metadata:|kind: Namespace\nmetadata:/);
    assert.match(rendered, /name: drainguard-netfilter\n/);
    assert.match(rendered, /pod-security\.kubernetes\.io\/enforce: privileged/);
    assert.doesNotMatch(rendered, /namespace: drainguard-system/);
  });

  it('is accepted by the API server, and RBAC grants exactly what the sidecar needs', async () => {
    const apply = await cp.kubectl(['apply', '-f', '-'], { input: rendered });
    assert.equal(apply.code, 0, apply.stderr);
    const can = async (verb: string, resource: string, ns?: string) =>
      (
        await cp.kubectl(['auth', 'can-i', verb, resource, '--as', sa, ...(ns ? ['-n', ns] : [])])
      ).stdout.trim();
    assert.equal(await can('list', 'pods'), 'yes');
    assert.equal(await can('watch', 'pods'), 'yes');
    assert.equal(await can('get', 'nodes'), 'yes');
    assert.equal(await can('create', 'events', 'default'), 'yes');
    assert.equal(await can('delete', 'pods'), 'no');
    assert.equal(await can('patch', 'nodes'), 'no');
    assert.equal(await can('get', 'secrets', 'drainguard-system'), 'no');
  });
});
