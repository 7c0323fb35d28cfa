// The azure-vnet leftovers in real namespaces: exactly the stale state goes, the protected
// state stays, and a pod whose IP was reused becomes reachable.
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { type AzureScene, buildAzureScene, IP, IP6 } from '../../../lab/bed/azure-scene.ts';
import { sh } from '../../../lab/bed/netns.ts';
import { steppingClock } from '../../../lab/fake/feature-context.ts';
import { waitFor } from '../../../shared/clock.ts';
import { createLogger } from '../../../shared/log.ts';
import { Cleaner } from '../../../sidecar/netfilter/cleaner.ts';
import { ToolRunner } from '../../../sidecar/runner.ts';

const log = createLogger('test', 'warn');

async function natRules(l: AzureScene): Promise<string[]> {
  const text = await l.node.run(['ebtables', '-t', 'nat', '-L']);
  const out: string[] = [];
  let chain = '';
  for (const line of text.split('\n')) {
    const m = /^Bridge chain: ([^,]+),/.exec(line);
    if (m) chain = m[1]!;
    else if (line.startsWith('-')) out.push(`${chain} ${line.trim()}`);
  }
  return out;
}

async function neighbourKeys(l: AzureScene): Promise<string[]> {
  const j = JSON.parse(await l.node.run(['ip', '-j', 'neigh', 'show'])) as { dst: string; dev: string }[];
  return j.map((n) => `${n.dst}|${n.dev}`);
}

// No ping binary on the test machines: a TCP SYN to a closed port answered by RST
// (ECONNREFUSED) proves the pod's kernel got the packet and its reply came back.
const PROBE = `const s=require('node:net').connect({host:process.argv[1],port:9});s.setTimeout(1000,()=>process.exit(3));s.on('connect',()=>process.exit(0));s.on('error',e=>process.exit(e.code==='ECONNREFUSED'?0:2));`;
const ping = async (l: AzureScene, ip: string) =>
  (await l.client.exec([process.execPath, '-e', PROBE, ip], { timeoutMs: 10_000 })).code === 0;

t.test('azure-vnet leftovers in real namespaces', async (t) => {
  let l: AzureScene;
  t.before(async () => {
    l = await buildAzureScene();
  });
  t.teardown(async () => {
    await l?.destroy();
  });

  t.test('the reused IP is unreachable before cleanup (the stale dnat rewrites the MAC)', async (t) => {
    // Sanity: the client reaches the node itself, so only the pod path is broken.
    t.ok(await ping(l, '192.0.2.10'), 'client reaches the node');
    t.equal(await ping(l, IP.reused), false, 'stale dnat must break the reused IP');
    t.equal(await ping(l, IP6.reused), false, 'and the reused IPv6');
    const fdb = await l.node.run(['bridge', '-j', 'fdb', 'show', 'br', 'azure0']);
    t.match(fdb, /"mac":"12:34:56:78:9a:bc","ifname":"eth0"/, 'tunnel MAC learned on the uplink');
  });

  t.test(
    'removes exactly the stale rules and neighbours after two passes, keeps every protected one',
    async (t) => {
      const clock = steppingClock(1_000_000);
      const runner = new ToolRunner({ log, prefix: ['ip', 'netns', 'exec', l.node.ns], historyLimit: 1000 });
      const cleaner = new Cleaner({ runner, log, clock, confirmMs: 2000, dryRun: false });
      const input = { pods: l.pods, nodeAddresses: ['192.0.2.10'] };
      const before = await natRules(l);
      const first = await cleaner.pass(input);
      t.equal(first.staleRules.length, l.staleSpecs.length);
      t.equal(first.removedRules.length, 0, 'nothing on the first sighting');
      t.strictSame(await natRules(l), before);
      clock.t += 2000;
      const second = await cleaner.pass(input);
      t.strictSame(second.errors, []);
      t.equal(second.removedRules.length, l.staleSpecs.length);
      const afterRules = await natRules(l);
      for (const s of l.staleSpecs) t.ok(!afterRules.includes(`PREROUTING ${s}`), `still there: ${s}`);
      for (const k of l.keptSpecs) t.ok(afterRules.includes(`${k.chain} ${k.spec}`), `removed: ${k.spec}`);
      t.equal(afterRules.length, l.keptSpecs.length);
      const neigh = await neighbourKeys(l);
      for (const n of l.staleNeighbours) t.ok(!neigh.includes(n), `neighbour still there: ${n}`);
      for (const n of l.keptNeighbours) t.ok(neigh.includes(n), `neighbour removed: ${n}`);
      t.match(await l.node.run(['ebtables', '-t', 'filter', '-L', 'FORWARD']), /-p 802_1Q -j DROP/);
      // One batch for the rules (by proven handles), one for the neighbours.
      const mutations = runner.history.filter((h) => h.mutates);
      t.strictSame(
        mutations.map((h) => `${h.tool} ${h.args.join(' ')}`),
        ['nft -f -', 'ip -force -batch -'],
      );
    },
  );

  t.test('the reused IP answers after cleanup, over IPv4 and IPv6', async (_t) => {
    await waitFor('ping to the reused IPv4', () => ping(l, IP.reused), {
      timeoutMs: 15_000,
      intervalMs: 200,
    });
    await waitFor('ping to the reused IPv6', () => ping(l, IP6.reused), {
      timeoutMs: 15_000,
      intervalMs: 200,
    });
  });

  t.test(
    'reinstall race: rules re-added after a pass go on the following passes, never the same one',
    async (t) => {
      const clock = steppingClock(1_000_000);
      const runner = new ToolRunner({ log, prefix: ['ip', 'netns', 'exec', l.node.ns] });
      const cleaner = new Cleaner({ runner, log, clock, confirmMs: 2000, dryRun: false });
      const input = { pods: l.pods, nodeAddresses: ['192.0.2.10'] };
      t.equal((await cleaner.pass(input)).staleRules.length, 0);
      await l.reinstall();
      t.equal(await ping(l, IP.reused), false, 'reinstalled dnat breaks it again');
      clock.t += 5000;
      const seen = await cleaner.pass(input);
      t.equal(seen.staleRules.length, l.staleSpecs.length);
      t.equal(seen.removedRules.length, 0, 'the pass that first sees them must not delete');
      clock.t += 2000;
      const removed = await cleaner.pass(input);
      t.equal(removed.removedRules.length, l.staleSpecs.length);
      await waitFor('ping after the second cleanup', () => ping(l, IP.reused), {
        timeoutMs: 15_000,
        intervalMs: 200,
      });
    },
  );
});

t.test('drainguard netfilter-cleanup --once', async (t) => {
  let l: AzureScene;
  let podsFile: string;
  t.before(async () => {
    l = await buildAzureScene();
    podsFile = join(tmpdir(), `dg-pods-${process.pid}.json`);
    const items = l.pods.map((p) => ({
      metadata: { name: p.name, namespace: p.namespace },
      spec: { nodeName: 'node-a', ...(p.name === 'host-net' ? { hostNetwork: true } : {}) },
      status: { phase: 'Running', podIP: p.ips[0], podIPs: p.ips.map((ip) => ({ ip })) },
    }));
    await writeFile(podsFile, JSON.stringify({ apiVersion: 'v1', kind: 'PodList', items }));
  });
  t.teardown(async () => {
    await l?.destroy();
  });
  const cli = (args: string[]) =>
    sh([process.execPath, 'cli/drainguard.ts', 'netfilter-cleanup', ...args], { timeoutMs: 60_000 });
  /** One confirmed cleanup of the scene's node-a (pods from the file), with `flags`. */
  const onceOnNodeA = (...flags: string[]) =>
    cli([
      '--once',
      ...flags,
      '--pods-file',
      podsFile,
      '--node',
      'node-a',
      '--netns',
      l.node.ns,
      '--confirm-seconds',
      '0.2',
    ]);

  t.test('--dry-run prints what would go and why, one line each, and changes nothing', async (t) => {
    const before = await natRules(l);
    const r = await onceOnNodeA('--dry-run');
    t.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trim().split('\n');
    t.equal(lines.length, l.staleSpecs.length + l.staleNeighbours.length, r.stdout);
    t.ok(lines.every((x) => x.startsWith('would remove ')));
    t.ok(
      lines.includes(
        `would remove ebtables -t nat PREROUTING -p IPv4 -i eth0 --ip-dst ${IP.reused} -j dnat --to-dst 02:aa:00:00:00:13 --dnat-target ACCEPT  # dnat for ${IP.reused} (pod kube-system/lxc-health) points at MAC 02:aa:00:00:00:13, not known here`,
      ),
      r.stdout,
    );
    t.strictSame(await natRules(l), before);
  });

  t.test('removes them for real, then finds nothing stale', async (t) => {
    const r = await onceOnNodeA();
    t.equal(r.code, 0, r.stderr);
    t.equal(
      r.stdout
        .trim()
        .split('\n')
        .filter((x) => x.startsWith('removed ')).length,
      l.staleSpecs.length + l.staleNeighbours.length,
    );
    t.equal((await natRules(l)).length, l.keptSpecs.length);
    const again = await onceOnNodeA();
    t.equal(again.code, 0, again.stderr);
    t.match(again.stdout, /^nothing stale on node-a \(6 pods checked\)/);
    t.ok(await ping(l, IP.reused));
  });

  t.test('missing tools or permissions: a clear message and a non-zero exit', async (t) => {
    const r = await cli(['--once', '--pods-file', podsFile, '--netns', 'dg-no-such-netns']);
    t.equal(r.code, 1);
    t.match(r.stderr, /drainguard netfilter-cleanup: ebtables is not usable: .*dg-no-such-netns/);
    const noOnce = await cli(['--pods-file', podsFile]);
    t.equal(noOnce.code, 2);
    t.match(noOnce.stderr, /--once is required/);
    const badFile = await cli(['--once', '--pods-file', '/nonexistent/pods.json']);
    t.equal(badFile.code, 1);
    t.match(badFile.stderr, /--pods-file: .*ENOENT/);
  });
});
