// Real network namespaces as test "nodes": a switch namespace holding a bridge, and one namespace
// per node attached by a veth. Names are unique per run; everything is removed at exit, and
// namespaces left by earlier runs whose process is gone are removed at start.
import { type ChildProcess, execFileSync, type SpawnOptions, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { waitFor } from '../../shared/clock.ts';
import { atExit, quietly } from './exit.ts';
import { type ExecResult, pidAlive, sh } from './proc.ts';

export { type ExecResult, sh } from './proc.ts';

async function must(cmd: string[], input?: string): Promise<string> {
  const r = await sh(cmd, input === undefined ? {} : { input });
  if (r.code !== 0) throw new Error(`${cmd.join(' ')} failed (${r.code}): ${r.stderr.trim()}`);
  return r.stdout;
}

export interface Netns {
  /** The namespace's name as `ip netns` knows it. */
  ns: string;
  exec(cmd: string[], opts?: { input?: string; timeoutMs?: number }): Promise<ExecResult>;
  /** Like exec but throws with stderr on a non-zero exit. */
  run(cmd: string[], opts?: { input?: string }): Promise<string>;
  /** A long-running process inside the namespace (killed at exit if still running). */
  spawn(cmd: string[], opts?: SpawnOptions): ChildProcess;
}

export interface TestNode extends Netns {
  name: string;
  ifname: 'eth0';
  ipv4: string;
  ipv6: string;
  mac: string;
}

export interface TestBed {
  id: string;
  switchNs: string;
  nodes: TestNode[];
  node(name: string): TestNode;
  /** First three octets of the node segment's /24, e.g. "198.51.100" (VIPs must come from it too). */
  subnet4: string;
  /** An address on the segment: `${subnet4}.${host}`. */
  addr4(host: number): string;
  /** Prefix length of the node segment (a /24, and 2001:db8::/64 for IPv6). */
  prefix4: 24;
  /** The root namespace's address on the switch, when created with hostLink. */
  hostIPv4: string | undefined;
  destroy(): Promise<void>;
}

const PREFIX = 'dgt';
const runId = `${PREFIX}${process.pid.toString(36)}`;
const created = new Set<string>();
const children = new Set<ChildProcess>();
/** A test process that dies must not leave its processes or namespaces behind. */
function removeAll(): void {
  for (const c of children) quietly(() => c.pid && process.kill(-c.pid, 'SIGKILL'));
  for (const ns of created) quietly(() => execFileSync('ip', ['netns', 'del', ns], { stdio: 'ignore' }));
}

/** Removes namespaces of earlier runs (named dgt<pid36>-…) whose process no longer exists. */
export async function reapLeftoverNamespaces(): Promise<string[]> {
  const out = await sh(['ip', 'netns', 'list']);
  const removed: string[] = [];
  for (const line of out.stdout.split('\n')) {
    const name = line.split(' ')[0] ?? '';
    const m = /^dgt([0-9a-z]+)-/.exec(name);
    if (!m) continue;
    const pid = Number.parseInt(m[1] as string, 36);
    if (pid === process.pid || pidAlive(pid)) continue;
    await sh(['ip', 'netns', 'del', name]);
    removed.push(name);
  }
  return removed;
}

let seq = 0;
// A detached bed (`make cluster`) outlives this process: its names must not look like a dead run's.
const detachedRunId = `dgc${process.pid.toString(36)}${Date.now().toString(36).slice(-3)}`;
const shortName = (label: string, detached = false) =>
  `${detached ? detachedRunId : runId}-${(seq++).toString(36)}${label.replace(/[^a-z0-9]/gi, '').slice(0, 8)}`;

function makeNetns(ns: string): Netns {
  const wrap = (cmd: string[]) => ['ip', 'netns', 'exec', ns, ...cmd];
  return {
    ns,
    exec: (cmd, opts) => sh(wrap(cmd), opts),
    run: (cmd, opts) => must(wrap(cmd), opts?.input),
    spawn(cmd, opts) {
      const [bin, ...args] = wrap(cmd) as [string, ...string[]];
      const child = spawn(bin, args, { detached: true, ...opts });
      children.add(child);
      child.once('exit', () => children.delete(child));
      return child;
    },
  };
}

/** One bare namespace with loopback up (single-host tests). */
export async function createNamespace(label: string): Promise<Netns & { destroy(): Promise<void> }> {
  atExit(removeAll, { signals: true });
  await reapLeftoverNamespaces();
  const ns = shortName(label);
  await must(['ip', 'netns', 'add', ns]);
  created.add(ns);
  await must(['ip', '-n', ns, 'link', 'set', 'lo', 'up']);
  return {
    ...makeNetns(ns),
    async destroy() {
      await sh(['ip', 'netns', 'del', ns]);
      created.delete(ns);
    },
  };
}

let bedSeq = 0;

/**
 * The documentation /24s, in order of preference. The machine's own uplink may sit in one of them
 * (seen here: eth0 192.0.2.2/24), so the bed takes one that no root-namespace route covers: a host
 * link there would shadow the machine's own network.
 */
const SEGMENTS = ['198.51.100', '203.0.113', '192.0.2', '198.19.100', '198.19.101', '198.19.102'];

/**
 * The /24s of addresses this machine must keep reaching: its nameservers, its proxy, and the
 * package registries (here deb.debian.org and registry.npmjs.org resolve into 203.0.113.0/24; a
 * bed's host link on that /24 once cut off an image build's apt-get).
 */
async function reachedSegments(): Promise<string[]> {
  const hosts = new Set(['deb.debian.org', 'security.debian.org', 'registry.npmjs.org']);
  for (const v of [
    process.env.https_proxy,
    process.env.HTTPS_PROXY,
    process.env.http_proxy,
    process.env.HTTP_PROXY,
  ])
    if (v)
      try {
        hosts.add(new URL(v).hostname);
      } catch {}
  const addrs: string[] = [];
  try {
    for (const m of readFileSync('/etc/resolv.conf', 'utf8').matchAll(/^nameserver\s+(\S+)/gm))
      addrs.push(m[1] ?? '');
  } catch {}
  await Promise.all(
    [...hosts].map(async (h) => {
      const r = await sh(['getent', 'ahostsv4', h], { timeoutMs: 3_000 }).catch(() => undefined);
      for (const line of r?.stdout.split('\n') ?? []) addrs.push(line.split(/\s+/)[0] ?? '');
    }),
  );
  return addrs.filter((a) => /^\d+\.\d+\.\d+\.\d+$/.test(a)).map((a) => a.split('.').slice(0, 3).join('.'));
}

export async function pickSegment(opts: { avoid?: string[] } = {}): Promise<string> {
  const routes = JSON.parse(
    (await sh(['ip', '-j', '-4', 'route', 'show', 'table', 'all'])).stdout || '[]',
  ) as { dst?: string }[];
  const used = new Set(routes.map((r) => (r.dst ?? '').split('/')[0]?.split('.').slice(0, 3).join('.')));
  const addrs = JSON.parse((await sh(['ip', '-j', '-4', 'addr'])).stdout || '[]') as {
    addr_info?: { local: string }[];
  }[];
  for (const a of addrs)
    for (const i of a.addr_info ?? []) used.add(i.local.split('.').slice(0, 3).join('.'));
  for (const a of opts.avoid ?? []) used.add(a);
  for (const a of await reachedSegments()) used.add(a);
  const free = SEGMENTS.find((s) => !used.has(s));
  if (!free) throw new Error(`every documentation /24 (${SEGMENTS.join(', ')}) is in use on this machine`);
  return free;
}

const SEGMENT_LOCK = '/run/drainguard-segment.lock';

/**
 * Runs fn holding a machine-wide lock (a directory, its owner's pid inside; a dead owner's lock
 * is taken over). Test processes run side by side (make test's three lanes): two beds picking a
 * segment at once would both see it free and put two host links on one /24.
 */
async function withSegmentLock<T>(fn: () => Promise<T>): Promise<T> {
  await waitFor(
    `the segment lock ${SEGMENT_LOCK}`,
    () => {
      try {
        mkdirSync(SEGMENT_LOCK);
        writeFileSync(`${SEGMENT_LOCK}/pid`, String(process.pid));
        return true;
      } catch {
        let owner = Number.NaN;
        try {
          owner = Number(readFileSync(`${SEGMENT_LOCK}/pid`, 'utf8'));
        } catch {}
        // No pid yet: its owner is between mkdir and write (or died there); a dead owner's goes.
        if (Number.isFinite(owner) && owner > 0 && !pidAlive(owner))
          rmSync(SEGMENT_LOCK, { recursive: true, force: true });
        return false;
      }
    },
    { timeoutMs: 120_000, intervalMs: 25 },
  );
  try {
    return await fn();
  } finally {
    rmSync(SEGMENT_LOCK, { recursive: true, force: true });
  }
}

/**
 * A switch (bridge in its own namespace) with one namespace per node on it. Nodes get
 * <subnet4>.<i+1>/24 and 2001:db8::<i+1>/64 on eth0 (documentation ranges; subnet4 from
 * pickSegment); with hostLink the root namespace gets <subnet4>.254 on the switch so node
 * processes can reach a server there.
 */
export async function createTestBed(opts: {
  nodes: string[];
  hostLink?: boolean;
  /** Outlive this process: not removed at its exit nor reaped as a dead run's (its owner removes it). */
  detached?: boolean;
}): Promise<TestBed> {
  atExit(removeAll, { signals: true });
  await reapLeftoverNamespaces();
  if (opts.nodes.length > 250) throw new Error('at most 250 nodes on one switch');
  const detached = Boolean(opts.detached);
  const track = (ns: string) => {
    if (!detached) created.add(ns);
  };
  const bedId = `${detached ? detachedRunId : runId}b${bedSeq++}`;
  let hostIPv4: string | undefined;
  let hostIf: string | undefined;
  const nodes: TestNode[] = [];
  const switchNs = shortName('sw', detached);
  // The segment is taken once the host link holds its address (a route other runs then see).
  const subnet4 = await withSegmentLock(async () => {
    const subnet4 = await pickSegment();
    await must(['ip', 'netns', 'add', switchNs]);
    track(switchNs);
    const sw = makeNetns(switchNs);
    await sw.run(['ip', 'link', 'add', 'br0', 'type', 'bridge']);
    // No STP and no forwarding delay: ports forward at once, as a plain L2 segment.
    await sw.run([
      'ip',
      'link',
      'set',
      'br0',
      'type',
      'bridge',
      'stp_state',
      '0',
      'forward_delay',
      '0',
      'mcast_snooping',
      '0',
    ]);
    await sw.run(['ip', 'link', 'set', 'br0', 'up']);
    for (const [i, name] of opts.nodes.entries()) {
      const ns = shortName(name, detached);
      await must(['ip', 'netns', 'add', ns]);
      track(ns);
      const node = makeNetns(ns);
      const tmp = `${bedId}n${i}`.slice(-15);
      await must(['ip', 'link', 'add', tmp, 'type', 'veth', 'peer', 'name', `${tmp}p`.slice(-15)]);
      const peer = `${tmp}p`.slice(-15);
      await must(['ip', 'link', 'set', tmp, 'netns', ns, 'name', 'eth0']);
      await must(['ip', 'link', 'set', peer, 'netns', switchNs, 'name', `port${i}`]);
      await sw.run(['ip', 'link', 'set', `port${i}`, 'master', 'br0', 'up']);
      const ipv4 = `${subnet4}.${i + 1}`;
      const ipv6 = `2001:db8::${(i + 1).toString(16)}`;
      // DAD off: addresses usable at once (tests wait on conditions, not on DAD timers).
      await node.run([
        'sysctl',
        '-qw',
        'net.ipv6.conf.all.accept_dad=0',
        'net.ipv6.conf.default.accept_dad=0',
      ]);
      await node.run(['ip', 'link', 'set', 'lo', 'up']);
      await node.run(['ip', 'addr', 'add', `${ipv4}/24`, 'dev', 'eth0']);
      await node.run(['ip', 'addr', 'add', `${ipv6}/64`, 'dev', 'eth0', 'nodad']);
      await node.run(['ip', 'link', 'set', 'eth0', 'up']);
      const link = JSON.parse(await node.run(['ip', '-j', 'link', 'show', 'eth0'])) as { address: string }[];
      nodes.push({ ...node, name, ifname: 'eth0', ipv4, ipv6, mac: link[0]?.address ?? '' });
    }
    if (opts.hostLink) {
      hostIf = `${bedId}h`.slice(-15);
      const peer = `${bedId}x`.slice(-15);
      await must(['ip', 'link', 'add', hostIf, 'type', 'veth', 'peer', 'name', peer]);
      await must(['ip', 'link', 'set', peer, 'netns', switchNs, 'name', 'uplink']);
      await sw.run(['ip', 'link', 'set', 'uplink', 'master', 'br0', 'up']);
      hostIPv4 = `${subnet4}.254`;
      await must(['ip', 'addr', 'add', `${hostIPv4}/24`, 'dev', hostIf]);
      await must(['ip', 'link', 'set', hostIf, 'up']);
    }
    return subnet4;
  });
  // Ready means forwarding: the first frames after link-up can be lost, so prove the segment works.
  const first = nodes[0];
  for (const n of [...nodes.slice(1).map((x) => x.ipv4), ...(hostIPv4 ? [hostIPv4] : [])]) {
    await waitFor(
      `${first?.name} reaches ${n}`,
      async () => (await first!.exec(['ping', '-c1', '-W1', n])).code === 0,
      {
        timeoutMs: 15_000,
        intervalMs: 20,
      },
    );
  }
  return {
    id: bedId,
    switchNs,
    nodes,
    node(name) {
      const n = nodes.find((x) => x.name === name);
      if (!n) throw new Error(`no node ${name}; nodes are ${nodes.map((x) => x.name).join(', ')}`);
      return n;
    },
    subnet4,
    addr4: (host: number) => `${subnet4}.${host}`,
    prefix4: 24,
    hostIPv4,
    async destroy() {
      for (const n of nodes) {
        await sh(['ip', 'netns', 'del', n.ns]);
        created.delete(n.ns);
      }
      // Deleting the switch namespace removes the uplink veth pair with it.
      await sh(['ip', 'netns', 'del', switchNs]);
      created.delete(switchNs);
      if (hostIf) await sh(['ip', 'link', 'del', hostIf]);
    },
  };
}
