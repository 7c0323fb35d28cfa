// The speaker simulator's wire: one wire.py per interface it answers on, as MetalLB opens an ARP
// and an NDP responder per interface. Each is told which VIPs to answer there (those whose
// L2Advertisements list the interface, or list none), and a VIP new on an interface is a takeover
// there: gratuitous ARP / unsolicited NAs on that interface.
import { type ChildProcess, spawn } from 'node:child_process';

export class Wires {
  private readonly procs = new Map<string, ChildProcess>();
  /** Interface -> the VIPs it answers for now. */
  private current = new Map<string, Set<string>>();

  /** `exited` is told when a helper ends (the caller decides whether that is expected). */
  constructor(ifaces: readonly string[], exited: (iface: string, code: number | null) => void) {
    for (const iface of ifaces) {
      const proc = spawn('python3', [new URL('./wire.py', import.meta.url).pathname, 'speaker', iface], {
        stdio: ['pipe', 'inherit', 'inherit'],
      });
      proc.on('exit', (code) => exited(iface, code));
      this.procs.set(iface, proc);
    }
  }

  get interfaces(): string[] {
    return [...this.procs.keys()];
  }

  private send(iface: string, line: string): void {
    this.procs.get(iface)?.stdin?.write(`${line}\n`);
  }

  /** What each interface answers now (either family: wire.py tells them apart). True if that changed. */
  announce(next: ReadonlyMap<string, ReadonlySet<string>>): boolean {
    let changed = false;
    for (const iface of this.procs.keys()) {
      const want = next.get(iface) ?? new Set<string>();
      const had = this.current.get(iface) ?? new Set<string>();
      const added = [...want].filter((v) => !had.has(v));
      if (added.length > 0 || [...had].some((v) => !want.has(v))) {
        this.send(iface, `vips ${[...want].join(' ')}`);
        changed = true;
      }
      if (added.length > 0) this.send(iface, `garp ${added.join(' ')}`);
    }
    this.current = new Map([...next].map(([i, v]) => [i, new Set(v)]));
    return changed;
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
