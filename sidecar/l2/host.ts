// The node's side of the L2 handover: the nft fence (read back, installed, removed), the link each
// VIP's route goes out of and the node's own addresses. Every command goes through the tool runner.
import type { Logger } from '../../shared/log.ts';
import { FENCE_TABLE } from '../../shared/names.ts';
import { fenceTablesIn, renderUnfence } from '../../shared/net/fence-tables.ts';
import type { ToolRunner } from '../runner.ts';
import { type FenceSpec, parseFence, renderFence } from './fence.ts';
import { ownAddresses, routeDevice } from './routes.ts';

/** What the handover needs from the node (a fake in unit tests). */
export interface L2Host {
  /** The fence installed now (read back from nft); undefined when there is none. */
  readFence(): Promise<FenceSpec | undefined>;
  /** Installs `spec`, or removes the fence when undefined; returns what is installed afterwards. */
  applyFence(spec: FenceSpec | undefined): Promise<FenceSpec | undefined>;
  /** The links the routes to these targets (VIPs, or 'default') go out of, resolved once each. */
  routeDevices(targets: readonly string[]): Promise<string[]>;
  /** Forgets the resolved links (between handovers: routes may change). */
  forgetRoutes(): void;
  /** The node's own addresses (`ip addr`); undefined when they cannot be read. */
  ownAddresses(): Promise<string[] | undefined>;
}

export class NodeHost implements L2Host {
  private readonly runner: ToolRunner;
  private readonly log: Logger;
  /** The link each VIP's route goes out of (`ip route get`), resolved when a handover needs it. */
  private readonly routeDevs = new Map<string, string | undefined>();

  constructor(runner: ToolRunner, log: Logger) {
    this.runner = runner;
    this.log = log;
  }

  async readFence(): Promise<FenceSpec | undefined> {
    const tables = fenceTablesIn((await this.runner.run('nft', ['-j', 'list', 'tables'])).stdout);
    const texts: string[] = [];
    for (const family of tables)
      texts.push((await this.runner.run('nft', ['-j', 'list', 'table', family, FENCE_TABLE])).stdout);
    return parseFence(texts);
  }

  async applyFence(spec: FenceSpec | undefined): Promise<FenceSpec | undefined> {
    const input = spec ? renderFence(spec) : renderUnfence();
    const r = await this.runner.run('nft', ['-f', '-'], { input, mutates: true, timeoutMs: 5_000 });
    // Observe-only: nothing ran; what it would be.
    if (r.skipped) return spec;
    return this.readFence();
  }

  async routeDevices(targets: readonly string[]): Promise<string[]> {
    for (const t of targets) if (!this.routeDevs.has(t)) this.routeDevs.set(t, await this.routeDevice(t));
    return [
      ...new Set(targets.map((t) => this.routeDevs.get(t)).filter((d): d is string => d !== undefined)),
    ];
  }

  forgetRoutes(): void {
    this.routeDevs.clear();
  }

  /** The link a VIP's route (or, for 'default', the default route) goes out of. */
  private async routeDevice(vip: string): Promise<string | undefined> {
    const args = vip === 'default' ? ['-j', 'route', 'show', 'default'] : ['-j', 'route', 'get', vip];
    try {
      const out = await this.runner.run('ip', args);
      return routeDevice(out.stdout);
    } catch (e) {
      this.log.warn(
        { vip, err: (e as Error).message },
        'no route to the VIP: cannot tell which link to fence',
      );
      return undefined;
    }
  }

  async ownAddresses(): Promise<string[] | undefined> {
    try {
      const own = ownAddresses((await this.runner.run('ip', ['-j', 'addr', 'show'])).stdout);
      return own.length > 0 ? own : undefined;
    } catch (e) {
      this.log.warn(
        { err: (e as Error).message },
        "cannot read the node's addresses: the fail-safe fence covers only the VIPs known here",
      );
      return undefined;
    }
  }
}
