// An in-memory host behind a ToolRunner: ebtables (nft or legacy listing style, restore batches
// that are all-or-nothing like ebtables-nft-restore), ip -j, bridge -j. For pure-ish tests of
// the Cleaner without namespaces.
import pino from 'pino';
import { type RunOptions, type RunResult, ToolError, ToolRunner } from '../../../../sidecar/runner.ts';

export interface FakeRule {
  chain: string;
  spec: string;
}

const stripZeros = (spec: string) =>
  spec.replace(/\b([0-9a-f]{2}(?::[0-9a-f]{2}){5})\b/g, (m) =>
    m
      .split(':')
      .map((b) => b.replace(/^0/, ''))
      .join(':'),
  );

export class FakeHost extends ToolRunner {
  rules: FakeRule[] = [];
  flavour: 'nft' | 'legacy' = 'nft';
  neighbours: { dst: string; dev: string; lladdr?: string; state: string[] }[] = [];
  addrs: {
    ifname: string;
    address: string;
    addr_info: { local: string }[];
    linkinfo?: { info_kind: string };
  }[] = [];
  routes4: { dst: string; dev: string; type?: string }[] = [];
  routes6: { dst: string; dev: string }[] = [];
  fdb: { mac: string; ifname: string; master?: string; state: string; flags: string[] }[] = [];
  /** Every deletion: the spec and the fake time it happened. */
  deleted: FakeRule[] = [];
  deletedNeighbours: FakeHost['neighbours'] = [];
  calls: string[] = [];
  /** Runs right before a batch (ebtables-restore or nft -f) is applied (to simulate races). */
  beforeRestore: (() => void) | undefined;
  failListing = false;
  /** nf_tables handles, as the kernel hands them out: per rule object, never reused. */
  private readonly handles = new Map<FakeRule, number>();
  private nextHandle = 2;
  /** Runs after each `nft -a list table bridge nat` (to simulate a change between listings). */
  afterNftList: (() => void) | undefined;
  nftAvailable = true;

  private handleOf(r: FakeRule): number {
    let h = this.handles.get(r);
    if (h === undefined) {
      h = this.nextHandle++;
      this.handles.set(r, h);
    }
    return h;
  }

  private remove(r: FakeRule): void {
    this.handles.delete(r);
    this.deleted.push(r);
  }

  nftListing(): string {
    const out = ['table bridge nat { # handle 1'];
    for (const c of ['PREROUTING', 'OUTPUT', 'POSTROUTING']) {
      out.push(
        `\tchain ${c} { # handle 1`,
        '\t\ttype filter hook prerouting priority dstnat; policy accept;',
      );
      for (const r of this.rules.filter((x) => x.chain === c)) {
        const ip = / --ip6?-dst (\S+)/.exec(r.spec)?.[1];
        const mac = / --to-dst (\S+)/.exec(r.spec)?.[1];
        const text = r.spec.includes('-j arpreply')
          ? 'ether type arp xt match arp counter packets 0 bytes 0 xt target arpreply'
          : ip && mac
            ? `iifname "eth0" ether type ip ${r.spec.includes('--ip6-dst') ? 'ip6' : 'ip'} daddr ${ip} counter packets 0 bytes 0 ether daddr set ${stripZeros(mac)} accept`
            : 'counter packets 0 bytes 0 xt target other';
        out.push(`\t\t${text} # handle ${this.handleOf(r)}`);
      }
      out.push('\t}');
    }
    out.push('}');
    return out.join('\n');
  }

  constructor() {
    super({ log: pino({ level: 'silent' }) });
  }

  listing(): string {
    const chains = ['PREROUTING', 'OUTPUT', 'POSTROUTING'];
    const out = ['Bridge table: nat', ''];
    for (const c of chains) {
      const rs = this.rules.filter((r) => r.chain === c);
      out.push(`Bridge chain: ${c}, entries: ${rs.length}, policy: ACCEPT`);
      for (const r of rs) out.push(this.flavour === 'legacy' ? stripZeros(r.spec) : r.spec);
      out.push('');
    }
    return out.join('\n');
  }

  override async run(tool: string, args: string[], opts: RunOptions = {}): Promise<RunResult> {
    const cmd = [tool, ...args].join(' ');
    this.calls.push(cmd);
    const ok = (stdout: string): RunResult => ({ stdout, stderr: '', skipped: false });
    if (opts.mutates && this.observeOnly) return { stdout: '', stderr: '', skipped: true };
    if (cmd === 'ebtables -V')
      return ok(this.flavour === 'nft' ? 'ebtables 1.8.9 (nf_tables)\n' : 'ebtables 1.8.9 (legacy)\n');
    if (cmd === 'ebtables -t nat -L') {
      if (this.failListing)
        throw new ToolError(cmd, 1, "ebtables v1.8.9 (legacy): can't initialize ebtables table 'nat'");
      return ok(this.listing());
    }
    if (tool === 'ebtables-restore') {
      this.beforeRestore?.();
      const lines = (opts.input ?? '').split('\n').filter((l) => l.startsWith('-D '));
      const next = [...this.rules];
      const removed: FakeRule[] = [];
      for (const l of lines) {
        const [, chain, ...rest] = l.split(' ');
        const spec = rest.join(' ');
        const i = next.findIndex((r) => r.chain === chain && sameRule(r.spec, spec));
        if (i < 0) throw new ToolError(cmd, 1, 'Bad rule (does a matching rule exist in that chain?).');
        removed.push(next[i]!);
        next.splice(i, 1);
      }
      this.rules = next;
      for (const r of removed) this.remove(r);
      return ok('');
    }
    if (cmd === 'nft -a list table bridge nat') {
      if (!this.nftAvailable) throw new ToolError(cmd, null, '', 'nft not found on PATH');
      const text = this.nftListing();
      this.afterNftList?.();
      return ok(text);
    }
    if (cmd === 'nft -f -') {
      this.beforeRestore?.();
      const handles = (opts.input ?? '')
        .split('\n')
        .filter(Boolean)
        .map((l) => Number(/^delete rule bridge nat PREROUTING handle (\d+)$/.exec(l)?.[1] ?? Number.NaN));
      const byHandle = new Map(
        [...this.handles].filter(([r]) => this.rules.includes(r)).map(([r, h]) => [h, r]),
      );
      if (handles.some((h) => !byHandle.has(h)))
        throw new ToolError(cmd, 1, 'Error: Could not process rule: No such file or directory');
      for (const h of handles) {
        const r = byHandle.get(h)!;
        this.rules.splice(this.rules.indexOf(r), 1);
        this.remove(r);
      }
      return ok('');
    }
    if (tool === 'ebtables' && args.includes('-D')) {
      const chain = args[args.indexOf('-D') + 1]!;
      const spec = args.slice(args.indexOf('-D') + 2).join(' ');
      const i = this.rules.findIndex((r) => r.chain === chain && sameRule(r.spec, spec));
      if (i < 0) throw new ToolError(cmd, 1, 'Bad rule');
      const [r] = this.rules.splice(i, 1);
      this.remove(r!);
      return ok('');
    }
    if (cmd === 'ip -d -j addr show') return ok(JSON.stringify(this.addrs));
    if (cmd === 'ip -j neigh show') return ok(JSON.stringify(this.neighbours));
    if (cmd === 'ip -j route show table main') return ok(JSON.stringify(this.routes4));
    if (cmd === 'ip -j -6 route show table main') return ok(JSON.stringify(this.routes6));
    if (cmd === 'bridge -j fdb show') return ok(JSON.stringify(this.fdb));
    if (cmd === 'ip -force -batch -') {
      let failed = false;
      for (const l of (opts.input ?? '').split('\n').filter(Boolean)) {
        const [, , ip, , dev] = l.split(' ');
        const i = this.neighbours.findIndex((n) => n.dst === ip && n.dev === dev);
        if (i < 0) failed = true;
        else this.deletedNeighbours.push(...this.neighbours.splice(i, 1));
      }
      if (failed) throw new ToolError(cmd, 1, 'RTNETLINK answers: No such file or directory');
      return ok('');
    }
    throw new ToolError(cmd, 127, `fake host: unexpected command ${cmd}`);
  }
}

/** ebtables matches by value, so a zero-stripped MAC matches its padded form. */
function sameRule(a: string, b: string): boolean {
  return stripZeros(a) === stripZeros(b);
}
