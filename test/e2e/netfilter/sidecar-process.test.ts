// The real sidecar process (drainguard sidecar, feature netfilter-cleanup) inside the node's
// network namespace, talking to a kube-apiserver over a host link: start-up pass, Event,
// /metrics on loopback, clean exit on SIGTERM.
import { type ChildProcess, spawn } from 'node:child_process';
import t from 'tap';
import { type AzureScene, buildAzureScene, registerAzureNode } from '../../../lab/bed/azure-scene.ts';
import { type ControlPlane, startControlPlane } from '../../../lab/bed/control-plane.ts';
import { pickSegment, sh } from '../../../lab/bed/netns.ts';
import { waitFor } from '../../../shared/clock.ts';
import type { KubeClient } from '../../../shared/kube/client.ts';
import type { KubeList, KubeObject } from '../../../shared/kube/types.ts';

const cli = new URL('../../../cli/drainguard.ts', import.meta.url).pathname;
const uid = process.pid.toString(36);
const nodeName = `nfp-node-${uid}`;
const ns = `nfp-${uid}`;
const hostIf = `dgnfh${uid}`.slice(0, 15);

async function must(cmd: string[]): Promise<void> {
  const r = await sh(cmd);
  if (r.code !== 0) throw new Error(`${cmd.join(' ')}: ${r.stderr.trim()}`);
}

t.test('drainguard sidecar process with netfilter-cleanup, in the node namespace', async (t) => {
  let l: AzureScene;
  let cp: ControlPlane;
  let client: KubeClient;
  let child: ChildProcess | undefined;
  let output = '';

  t.before(async () => {
    l = await buildAzureScene();
    // A host link into the node namespace, on a documentation /24 that neither the scene (node
    // 192.0.2.0/24, pods 198.51.100.0/24) nor any root-namespace route uses.
    const seg = await pickSegment({ avoid: ['192.0.2', '198.51.100'] });
    const hostIP = `${seg}.254`;
    await must(['ip', 'link', 'add', hostIf, 'type', 'veth', 'peer', 'name', 'hostlink', 'netns', l.node.ns]);
    await must(['ip', 'addr', 'add', `${hostIP}/24`, 'dev', hostIf]);
    await must(['ip', 'link', 'set', hostIf, 'up']);
    await l.node.run(['ip', 'addr', 'add', `${seg}.1/24`, 'dev', 'hostlink']);
    await l.node.run(['ip', 'link', 'set', 'hostlink', 'up']);
    cp = await startControlPlane({ bindAddress: hostIP, sanIPs: [hostIP] });
    client = cp.client();
    await registerAzureNode(client, nodeName, ns);
    for (const p of l.pods) {
      await client.create(`/api/v1/namespaces/${ns}/pods`, {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: p.name, namespace: ns },
        spec: { nodeName, containers: [{ name: 'c', image: 'example.invalid/c' }] },
      });
      const pod = await client.get<KubeObject>(`/api/v1/namespaces/${ns}/pods/${p.name}`);
      await client.replace(`/api/v1/namespaces/${ns}/pods/${p.name}/status`, {
        ...pod,
        status: { phase: 'Running', podIP: p.ips[0], podIPs: p.ips.map((ip) => ({ ip })) },
      });
    }
  });

  t.teardown(async () => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
    client?.close();
    await cp?.stop();
    await l?.destroy();
    await sh(['ip', 'link', 'del', hostIf]);
  });

  t.test('cleans up on start, reports, serves /metrics on loopback and exits 0 on SIGTERM', async (t) => {
    child = spawn('ip', ['netns', 'exec', l.node.ns, process.execPath, cli, 'sidecar'], {
      env: {
        PATH: process.env.PATH,
        KUBECONFIG: cp.kubeconfigPath,
        DRAINGUARD_PROFILE: 'netfilter-cleanup',
        DRAINGUARD_FEATURES: 'netfilter-cleanup',
        DRAINGUARD_POD_NAME: 'drainguard-nf',
        DRAINGUARD_POD_NAMESPACE: ns,
        DRAINGUARD_NODE_NAME: nodeName,
        DRAINGUARD_BIND_ADDRESS: '127.0.0.1',
        DRAINGUARD_PORT: '7483',
        DRAINGUARD_CLEANUP_CONFIRM_SECONDS: '1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout?.on('data', (d: Buffer) => {
      output += d.toString();
    });
    child.stderr?.on('data', (d: Buffer) => {
      output += d.toString();
    });
    const exited = new Promise<number | null>((r) => child!.once('exit', r));
    await waitFor(
      'stale rules removed by the sidecar',
      async () => {
        const text = await l.node.run(['ebtables', '-t', 'nat', '-L', 'PREROUTING']);
        return l.staleSpecs.every((s) => !text.includes(s));
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    ).catch((e: Error) => {
      throw new Error(`${e.message}\n--- sidecar output ---\n${output.slice(-3000)}`);
    });
    const text = await l.node.run(['ebtables', '-t', 'nat', '-L']);
    for (const k of l.keptSpecs) t.ok(text.includes(k.spec), `kept: ${k.spec}`);
    await waitFor(
      'Event on the Node',
      async () =>
        (await client.get<KubeList>('/api/v1/namespaces/default/events')).items?.some(
          (e) => (e.involvedObject as { name?: string }).name === nodeName && e.reason === 'NetfilterCleanup',
        ),
      { timeoutMs: 10_000, intervalMs: 200 },
    );
    const metrics = await l.node.run([
      process.execPath,
      '-e',
      "fetch('http://127.0.0.1:7483/metrics').then(r=>r.text()).then(t=>process.stdout.write(t))",
    ]);
    t.match(metrics, /drainguard_netfilter_removed_total\{dry_run="false",kind="rule"\} 10/);
    t.match(metrics, /drainguard_netfilter_ebtables_usable\{flavour="nft"\} 1/);
    t.match(output, /"msg":"stale ebtables rule"/);
    child.kill('SIGTERM');
    t.equal(await exited, 0, output.slice(-2000));
  });
});
