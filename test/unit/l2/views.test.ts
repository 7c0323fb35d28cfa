// The feature's views of the node (host.ts) and of who else could announce (candidates.ts),
// each with a scripted tool runner or API.
import t from 'tap';
import { ApiError, type KubeClient } from '../../../shared/kube/client.ts';
import type { Node, Pod } from '../../../shared/kube/types.ts';
import { createLogger } from '../../../shared/log.ts';
import { CandidateReader } from '../../../sidecar/l2/candidates.ts';
import type { FenceSpec } from '../../../sidecar/l2/fence.ts';
import { NodeHost } from '../../../sidecar/l2/host.ts';
import type { ToolRunner } from '../../../sidecar/runner.ts';
import { fakeContext, ManualClock } from '../sidecar/fake-context.ts';

const T0 = 1_700_000_000_000;
const spec: FenceSpec = { vips4: ['192.0.2.10'], vips6: [], interfaces: ['eth0'], memberlistPorts: [] };

/** A runner that answers `ip`/`nft` from a script and records each call. */
function scriptedRunner(answer: (tool: string, args: string[]) => { stdout: string; skipped?: boolean }) {
  const calls: string[] = [];
  const runner = {
    async run(tool: string, args: string[]) {
      calls.push(`${tool} ${args.join(' ')}`);
      const a = answer(tool, args);
      return { stdout: a.stdout, stderr: '', skipped: a.skipped ?? false };
    },
  } as unknown as ToolRunner;
  return { runner, calls };
}

const log = createLogger('test', 'silent');

t.test('host: each VIP route resolved once until forgotten; the links deduplicated', async (t) => {
  const { runner, calls } = scriptedRunner((_tool, args) => {
    if (args.includes('192.0.2.99')) throw new Error('RTNETLINK answers: Network is unreachable');
    const dev = args.includes('default') ? 'eth1' : 'eth0';
    return { stdout: JSON.stringify([{ dst: args.at(-1), dev }]) };
  });
  const host = new NodeHost(runner, log);
  t.strictSame(await host.routeDevices(['192.0.2.10', '192.0.2.11', 'default', '192.0.2.99']), [
    'eth0',
    'eth1',
  ]);
  t.equal(calls.length, 4);
  t.strictSame(await host.routeDevices(['192.0.2.10', '192.0.2.99']), ['eth0'], 'no route: no link');
  t.equal(calls.length, 4, 'resolved once, failures too');
  host.forgetRoutes();
  await host.routeDevices(['192.0.2.10']);
  t.equal(calls.length, 5);
});

t.test('host: a fence is read back after nft applied it; observe-only reads nothing back', async (t) => {
  const applied = scriptedRunner((_tool, args) => ({
    stdout: args.includes('tables') ? '{"nftables":[]}' : '',
  }));
  t.equal(await new NodeHost(applied.runner, log).applyFence(spec), undefined, 'not there when read back');
  t.strictSame(applied.calls, ['nft -f -', 'nft -j list tables']);

  const observeOnly = scriptedRunner(() => ({ stdout: '', skipped: true }));
  const host = new NodeHost(observeOnly.runner, log);
  t.strictSame(await host.applyFence(spec), spec, 'what it would be');
  t.equal(await host.applyFence(undefined), undefined);
  t.strictSame(observeOnly.calls, ['nft -f -', 'nft -f -']);
});

const ready = [{ type: 'Ready', status: 'True' }];
const nodes: Node[] = ['node-a', 'node-b', 'node-c'].map((name) => ({
  metadata: { name, labels: {} },
  spec: {},
  status: { conditions: ready },
}));
const speaker = (node: string): Pod => ({
  metadata: {
    name: `speaker-${node}`,
    ownerReferences: [{ apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'speaker', uid: 'ds' }],
  },
  spec: { nodeName: node },
  status: { conditions: ready },
});

/** The API of the wide reads: Nodes, speaker pods, no MetalLB config, EndpointSlices in v1beta1 only. */
function wideApi() {
  const api = { down: false, calls: [] as string[] };
  const client = {
    async get(path: string) {
      api.calls.push(path.split('?')[0] as string);
      if (api.down) throw new ApiError('GET', path, 503, 'ServiceUnavailable', 'down');
      if (path === '/api/v1/nodes') return { items: nodes };
      if (path === '/api/v1/namespaces/metallb-system/pods')
        return { items: ['node-a', 'node-b', 'node-c'].map(speaker) };
      if (path.startsWith('/apis/discovery.k8s.io/v1beta1/'))
        return {
          items: [
            {
              endpoints: [
                { topology: { 'kubernetes.io/hostname': 'node-a' }, conditions: { ready: true } },
                { topology: { 'kubernetes.io/hostname': 'node-c' }, conditions: { ready: true } },
                { topology: { 'kubernetes.io/hostname': 'node-b' }, conditions: { ready: false } },
              ],
            },
          ],
        };
      throw new ApiError('GET', path, 404, 'NotFound', 'no such resource');
    },
  };
  return { api, client: client as unknown as KubeClient };
}

function reader() {
  const clock = new ManualClock(T0);
  const { api, client } = wideApi();
  const { ctx, drain } = fakeContext({
    env: {
      DRAINGUARD_PROFILE: 'metallb-speaker',
      DRAINGUARD_FEATURES: 'l2-handover',
      DRAINGUARD_POD_NAME: 'speaker-node-a',
      DRAINGUARD_POD_NAMESPACE: 'metallb-system',
      DRAINGUARD_NODE_NAME: 'node-a',
    },
    client,
    clock,
  });
  drain.pod = {
    metadata: {
      name: 'speaker-node-a',
      ownerReferences: [
        { apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'speaker', uid: 'ds', controller: true },
      ],
    },
  };
  return { candidates: new CandidateReader(ctx), api, clock };
}

const www = { service: 'web/www', ips: ['192.0.2.10'] };
const local = { service: 'web/local', ips: ['192.0.2.20'] };
const isLocal = (s: string) => s === 'web/local';

t.test('candidates: other speakers, and per Local service only nodes with a ready endpoint', async (t) => {
  const { candidates, api } = reader();
  await candidates.refresh(true, [www, local], isLocal);
  t.strictSame(candidates.others, ['node-b', 'node-c']);
  t.strictSame(candidates.perService, { 'web/www': ['node-b', 'node-c'], 'web/local': ['node-c'] });
  // discovery.k8s.io/v1 is not served (Kubernetes < 1.21): v1beta1 from then on.
  const slices = (v: string) => api.calls.filter((c) => c.startsWith(`/apis/discovery.k8s.io/${v}/`)).length;
  t.equal(slices('v1'), 1);
  await candidates.refresh(true, [www, local], isLocal);
  t.equal(slices('v1'), 1);
  t.equal(slices('v1beta1'), 2);
});

t.test(
  'candidates: a handover under way re-reads every 2 s; a failed read keeps the last for 10 s',
  async (t) => {
    const { candidates, api, clock } = reader();
    await candidates.refresh(true, [www], isLocal);
    const reads = () => api.calls.filter((c) => c === '/api/v1/nodes').length;
    clock.advance(1_000);
    await candidates.refresh(false, [www], isLocal);
    t.equal(reads(), 1, 'throttled');
    await candidates.refresh(true, [www], isLocal);
    t.equal(reads(), 2, 'a handover about to start reads fresh');
    clock.advance(2_500);
    await candidates.refresh(false, [www], isLocal);
    t.equal(reads(), 3);

    api.down = true;
    clock.advance(2_500);
    await candidates.refresh(false, [www], isLocal);
    t.strictSame(candidates.others, ['node-b', 'node-c'], 'kept: read 2.5 s ago');
    clock.advance(10_000);
    await candidates.refresh(false, [www], isLocal);
    t.equal(candidates.others, undefined, 'too old: not known');
    t.equal(candidates.perService, undefined);

    api.down = false;
    await candidates.refresh(true, [www], isLocal);
    api.down = true;
    await candidates.refresh(true, [www], isLocal);
    t.equal(candidates.others, undefined, 'a fresh read that fails leaves nothing known');
  },
);
