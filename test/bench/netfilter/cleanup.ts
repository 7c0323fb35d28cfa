// make bench-cleanup: one node namespace with 1,000 pods (198.18.0.0/15), 2,000 stale per-pod
// ebtables rules and 500 protected ones. Measures a full deleting pass (list, decide, re-list,
// one batch) against the per-rule-exec baseline (same listing and decision, one
// `ebtables -t nat -D` per rule), both in this run. Last line: one JSON object.
import pino from 'pino';
import { arpreply, dnat4, linkMac, veth } from '../../../lab/bed/azure-scene.ts';
import { createNamespace } from '../../../lab/bed/netns.ts';
import { Cleaner } from '../../../sidecar/netfilter/cleaner.ts';
import { decide, type PodInfo } from '../../../sidecar/netfilter/decide.ts';
import { ebtablesDeleteArgs, ebtablesRestoreInput } from '../../../sidecar/netfilter/plan.ts';
import { ToolRunner } from '../../../sidecar/runner.ts';

const PODS = 1000;
const GONE = 1000; // IPs of pods that are gone: arpreply + dnat each = 2,000 stale rules
const LIVE_WITH_RULES = 247; // live pods whose rules point at their neighbour on the route device
const log = pino({ level: 'silent' });

const ipOf = (i: number) => `198.18.${(i >> 8) & 255}.${i & 255}`; // i < 65536 stays in 198.18.0.0/16
const macOf = (prefix: number, i: number) =>
  `02:${prefix.toString(16).padStart(2, '0')}:00:00:${((i >> 8) & 255).toString(16).padStart(2, '0')}:${(i & 255).toString(16).padStart(2, '0')}`;

async function main(): Promise<number> {
  const node = await createNamespace('bench');
  try {
    await veth({ name: 'dgbench0', ns: node.ns }, { name: 'eth0', ns: node.ns });
    await node.run(['ip', 'link', 'add', 'azure0', 'type', 'bridge']);
    await node.run(['ip', 'link', 'set', 'eth0', 'master', 'azure0']);
    for (const d of ['eth0', 'dgbench0', 'azure0']) await node.run(['ip', 'link', 'set', d, 'up']);
    await node.run(['ip', 'addr', 'add', '192.0.2.10/24', 'dev', 'azure0']);
    await node.run(['ip', 'route', 'add', '198.18.0.0/15', 'dev', 'azure0']);
    const eth0Mac = await linkMac(node, 'eth0');

    // Pods 0..999 are current; IPs 1000..1999 belonged to pods that are gone.
    const pods: PodInfo[] = Array.from({ length: PODS }, (_, i) => ({
      namespace: 'bench',
      name: `pod-${i}`,
      ips: [ipOf(i + 1)],
    }));
    const protectedSpecs: { chain: string; spec: string }[] = [
      { chain: 'PREROUTING', spec: arpreply('192.0.2.10', eth0Mac) },
      {
        chain: 'PREROUTING',
        spec: '-p ARP -i eth0 --arp-op Reply -j dnat --to-dst ff:ff:ff:ff:ff:ff --dnat-target ACCEPT',
      },
      { chain: 'PREROUTING', spec: '-i az+ -j dnat --to-dst 12:34:56:78:9a:bc --dnat-target ACCEPT' },
      { chain: 'PREROUTING', spec: '-p 802_1Q -j DROP' },
      {
        chain: 'PREROUTING',
        spec: '-p IPv4 -i eth0 --ip-dst 198.18.0.0/16 -j dnat --to-dst 02:ee:00:00:00:01 --dnat-target ACCEPT',
      },
      {
        chain: 'POSTROUTING',
        spec: `-s Unicast -o eth0 -j snat --to-src ${eth0Mac} --snat-arp --snat-target ACCEPT`,
      },
    ];
    const neighbours: string[] = [];
    for (let i = 0; i < LIVE_WITH_RULES; i++) {
      const ip = ipOf(i + 1);
      const mac = macOf(0xbb, i + 1);
      protectedSpecs.push(
        { chain: 'PREROUTING', spec: arpreply(ip, mac) },
        { chain: 'PREROUTING', spec: dnat4(ip, mac) },
      );
      neighbours.push(`neigh replace ${ip} lladdr ${mac} dev azure0 nud permanent`);
    }
    const staleSpecs: string[] = [];
    for (let i = 0; i < GONE; i++) {
      const ip = ipOf(PODS + 1 + i);
      const mac = macOf(0xaa, i + 1);
      staleSpecs.push(arpreply(ip, mac), dnat4(ip, mac));
    }
    await node.run(['ip', '-batch', '-'], { input: `${neighbours.join('\n')}\n` });
    // Interleave stale and protected rules as they would accumulate over time.
    const pre: string[] = [];
    const prot = protectedSpecs.filter((p) => p.chain === 'PREROUTING').map((p) => p.spec);
    for (let i = 0; i < Math.max(prot.length, staleSpecs.length); i++) {
      if (i < prot.length) pre.push(prot[i]!);
      if (i < staleSpecs.length) pre.push(staleSpecs[i]!);
    }
    const table = [
      '*nat',
      ':PREROUTING ACCEPT',
      ':OUTPUT ACCEPT',
      ':POSTROUTING ACCEPT',
      ...pre.map((s) => `-A PREROUTING ${s}`),
      ...protectedSpecs.filter((p) => p.chain === 'POSTROUTING').map((p) => `-A POSTROUTING ${p.spec}`),
      'COMMIT',
      '',
    ].join('\n');
    // Resets the bench namespace's nat table to the starting state (a full restore, our own netns).
    const reset = () => node.run(['ebtables-restore'], { input: table });
    const listed = async () =>
      (await node.run(['ebtables', '-t', 'nat', '-L']))
        .split('\n')
        .filter((l) => l.startsWith('-'))
        .map((l) => l.trim());
    const input = { pods, nodeAddresses: ['192.0.2.10'] };
    const prefix = ['ip', 'netns', 'exec', node.ns];
    const clock = { t: 0, now: () => clock.t, sleep: async () => {} };

    // Candidate: the real Cleaner; the first pass sees, the second (timed) deletes.
    await reset();
    const before = await listed();
    process.stdout.write(
      `bench-cleanup: ${pods.length} pods, ${before.length} rules (${staleSpecs.length} stale, ${protectedSpecs.length} protected)\n`,
    );
    if (staleSpecs.length + protectedSpecs.length !== before.length)
      throw new Error('setup: rule count mismatch');
    const runner = new ToolRunner({ log, prefix, historyLimit: 100 });
    const cleaner = new Cleaner({ runner, log, clock, confirmMs: 2000, dryRun: false });
    const t0 = performance.now();
    const seen = await cleaner.pass(input);
    const observeS = (performance.now() - t0) / 1000;
    clock.t += 2000;
    const t1 = performance.now();
    const pass = await cleaner.pass(input);
    const passS = (performance.now() - t1) / 1000;
    if (process.env.BENCH_DEBUG)
      for (const h of runner.history) process.stdout.write(`  ${h.tool} ${h.args.join(' ')}: ${h.ms} ms\n`);
    const after = await listed();
    const protectedDeleted = protectedSpecs.filter((p) => !after.includes(p.spec)).length;
    const staleLeft = staleSpecs.filter((s) => after.includes(s)).length;
    process.stdout.write(
      `candidate: first pass (list+decide) ${observeS.toFixed(3)} s saw ${seen.staleRules.length} stale; deleting pass ${passS.toFixed(3)} s removed ${pass.removedRules.length} in one batch; stale left ${staleLeft}, protected deleted ${protectedDeleted}\n`,
    );

    // Baseline: same listing, decision and re-list; then one exec per rule.
    await reset();
    const baseRunner = new ToolRunner({ log, prefix, historyLimit: 10 });
    const lister = new Cleaner({ runner: baseRunner, log, clock, confirmMs: 0, dryRun: true });
    const t2 = performance.now();
    await lister.snapshot(); // the listing a pass starts with
    const fresh = decide({ snapshot: await lister.snapshot(), ...input }); // the re-list before deleting
    for (const r of fresh.staleRules)
      await baseRunner.run('ebtables', ebtablesDeleteArgs(r), { mutates: true });
    const baseS = (performance.now() - t2) / 1000;
    const afterBase = await listed();
    const baseProtectedDeleted = protectedSpecs.filter((p) => !afterBase.includes(p.spec)).length;
    process.stdout.write(
      `baseline: per-rule exec of ${fresh.staleRules.length} deletes ${baseS.toFixed(3)} s; protected deleted ${baseProtectedDeleted}\n`,
    );
    // For reference: the by-spec fallback batch alone (what runs when handles cannot be proven).
    await reset();
    const fb = decide({ snapshot: await lister.snapshot(), ...input }).staleRules;
    const t3 = performance.now();
    await baseRunner.run('ebtables-restore', ['--noflush'], {
      input: ebtablesRestoreInput(fb),
      mutates: true,
    });
    const fallbackS = (performance.now() - t3) / 1000;
    const listedAfterFallback = await listed();
    const fbProtectedDeleted = protectedSpecs.filter((p) => !listedAfterFallback.includes(p.spec)).length;
    process.stdout.write(
      `fallback: ebtables-restore --noflush of ${fb.length} -D lines alone ${fallbackS.toFixed(3)} s; protected deleted ${fbProtectedDeleted}\n`,
    );
    const speedup = baseS / passS;
    const ok =
      protectedDeleted === 0 &&
      staleLeft === 0 &&
      pass.errors.length === 0 &&
      baseProtectedDeleted === 0 &&
      fbProtectedDeleted === 0;
    if (passS > 1) process.stdout.write(`note: pass ${passS.toFixed(3)} s is above the 1 s target\n`);
    if (speedup < 10) process.stdout.write(`note: speedup ${speedup.toFixed(1)} is below the target of 10\n`);
    process.stdout.write(
      `${JSON.stringify({
        bench: 'cleanup',
        pods: pods.length,
        stale_rules: staleSpecs.length,
        pass_s: Number(passS.toFixed(3)),
        per_rule_baseline_s: Number(baseS.toFixed(3)),
        speedup: Number(speedup.toFixed(1)),
        protected_deleted: protectedDeleted,
      })}\n`,
    );
    return ok ? 0 : 1;
  } finally {
    await node.destroy();
  }
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    process.stderr.write(`bench-cleanup: ${(e as Error).stack ?? String(e)}\n`);
    process.exitCode = 1;
  },
);
