// The speaker simulator's wire: one wire.py per interface it answers on, as MetalLB opens an ARP
// and an NDP responder per interface. Each is told which VIPs to answer there (those whose
// L2Advertisements list the interface, or list none), and a VIP new on an interface is a takeover
// there: gratuitous ARP / unsolicited NAs on that interface. A new set is applied once its helper
// says so: MetalLB answers from its own process the moment it announces, and writes the
// ServiceL2Status after; a status written before a starved helper answers would be a dark VIP
// of the simulator's own making (drainguard fences the old owner on that status).
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

/** How long announce() waits for a helper's acknowledgement (a helper that died is not waited on). */
const APPLY_TIMEOUT_MS = 5000;

export class Wires {
  private readonly procs = new Map<string, ChildProcess>();
  /** Interface -> the VIPs it answers for now. */
  private current = new Map<string, Set<string>>();
  /** Interface -> the acknowledgements of "vips" it still owes, oldest first. */
  private readonly pending = new Map<string, Array<() => void>>();

  /** `exited` is told when a helper ends (the caller decides whether that is expected). */
  constructor(ifaces: readonly string[], exited: (iface: string, code: number | null) => void) {
    for (const iface of ifaces) {
      const proc = spawn('python3', [new URL('./wire.py', import.meta.url).pathname, 'speaker', iface], {
        stdio: ['pipe', 'pipe', 'inherit'],
      });
      this.pending.set(iface, []);
      createInterface({ input: proc.stdout as NodeJS.ReadableStream }).on('line', (line) => {
        if (line === 'applied') this.pending.get(iface)?.shift()?.();
      });
      proc.on('exit', (code) => {
        for (const done of this.pending.get(iface)?.splice(0) ?? []) done();
        exited(iface, code);
      });
      this.procs.set(iface, proc);
    }
  }

  get interfaces(): string[] {
    return [...this.procs.keys()];
  }

  private send(iface: string, line: string): void {
    this.procs.get(iface)?.stdin?.write(`${line}\n`);
  }

  /**
   * What each interface answers now (either family: wire.py tells them apart). Resolves once every
   * changed interface answers its new set (at most APPLY_TIMEOUT_MS); true if anything changed.
   */
  async announce(next: ReadonlyMap<string, ReadonlySet<string>>): Promise<boolean> {
    const applied: Promise<void>[] = [];
    for (const iface of this.procs.keys()) {
      const want = next.get(iface) ?? new Set<string>();
      const had = this.current.get(iface) ?? new Set<string>();
      const added = [...want].filter((v) => !had.has(v));
      if (added.length > 0 || [...had].some((v) => !want.has(v))) {
        applied.push(this.ack(iface));
        this.send(iface, `vips ${[...want].join(' ')}`);
      }
      if (added.length > 0) this.send(iface, `garp ${added.join(' ')}`);
    }
    this.current = new Map([...next].map(([i, v]) => [i, new Set(v)]));
    await Promise.all(applied);
    return applied.length > 0;
  }

  /** Settles on the interface's next acknowledgement, its helper's exit, or APPLY_TIMEOUT_MS. */
  private ack(iface: string): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, APPLY_TIMEOUT_MS);
      this.pending.get(iface)?.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** A resync of VIPs already owned re-arms their gratuitous ARP / unsolicited NAs, where announced. */
  regarp(): void {
    for (const [iface, vips] of this.current)
      if (vips.size > 0) this.send(iface, `garp ${[...vips].join(' ')}`);
  }

  quit(): void {
    for (const iface of this.procs.keys()) this.send(iface, 'quit');
  }
}
