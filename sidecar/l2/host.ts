// The node's side of the L2 handover: the nft fence (read back, installed, removed), the links to
// fence (as fence-links.ts plans them: those named that exist here, else or besides the links the
// routes go out of) and the node's own addresses. Every command goes through the tool runner.
import { isIPv6 } from 'node:net';
import type { Logger } from '../../shared/log.ts';
import { FENCE_TABLE } from '../../shared/names.ts';
import { fenceTablesIn, renderUnfence } from '../../shared/net/fence-tables.ts';
import { readOwnAddresses } from '../ip-json.ts';
import type { ToolRunner } from '../runner.ts';
import { type FenceSpec, parseFence, renderFence } from './fence.ts';
import type { LinkPlan } from './fence-links.ts';
import { installedFence } from './fence-update.ts';
import { linkAddresses, linkNames, localRoute, routeDevice, subnetLink } from './routes.ts';

/** The links a fence goes on, and the named ones it cannot go on. */
export interface FenceLinks {
  interfaces: string[];
  /** Named links that are not on this node: left out of the fence. */
  missing: string[];
}

/** What the handover needs from the node (a fake in unit tests). */
export interface L2Host {
  /**
   * The fence installed now (read back from nft); undefined when there is none. Also checks that
   * its interfaces are still links of this node: one that vanished since (its chain drops nothing)
   * is reported missing by fenceLinks from then on.
   */
  readFence(): Promise<FenceSpec | undefined>;
  /** Installs `spec`, or removes the fence when undefined; returns what is installed afterwards. */
  applyFence(spec: FenceSpec | undefined): Promise<FenceSpec | undefined>;
  /**
   * The links to fence (fence-links.ts plans them): those of `named` (DRAINGUARD_L2_INTERFACES, or
   * the own ServiceL2Status objects') that exist on this node — NIC names differ between nodes, and
   * a netdev chain on a missing device drops nothing (Linux ≥ 6.16 accepts it; older kernels fail
   * the whole transaction, memberlist cut included); when none is named, or none of them exists
   * here, the links the routes to `targets` go out of. And in any case the links the routes to
   * `always` go out of, and `kept` (the installed fence's). Links of the installed fence that
   * vanished (readFence) are missing too, and never among the links.
   */
  fenceLinks(plan: LinkPlan): Promise<FenceLinks>;
  /** Forgets the resolved links and the node's link names (between handovers: they may change). */
  forgetRoutes(): void;
  /**
   * The node's own addresses (`ip addr`), never those on Service-IP links (kube-ipvs0) nor any of
   * `notOwn` (the LoadBalancer VIPs known here); undefined when they cannot be read.
   */
  ownAddresses(notOwn?: readonly string[]): Promise<string[] | undefined>;
}

export class NodeHost implements L2Host {
  private readonly runner: ToolRunner;
  private readonly log: Logger;
  /** The link each VIP's route goes out of (`ip route get`), resolved when a handover needs it. */
  private readonly routeDevs = new Map<string, string | undefined>();
  /** The node's link names (`ip link`), read when a handover needs them; null when unreadable. */
  private links: string[] | null | undefined;
  /** Interfaces of the installed fence that were no longer links of this node at the last read-back. */
  private vanished: string[] = [];

  constructor(runner: ToolRunner, log: Logger) {
    this.runner = runner;
    this.log = log;
  }

  async readFence(): Promise<FenceSpec | undefined> {
    const fence = await this.readFenceTables();
    await this.checkFenceLinks(fence);
    return fence;
  }

  private async readFenceTables(): Promise<FenceSpec | undefined> {
    return parseFence(await this.listFenceTables());
  }

  /** `nft -j list table …` of each drainguard table there is. */
  private async listFenceTables(): Promise<string[]> {
    const tables = fenceTablesIn((await this.runner.run('nft', ['-j', 'list', 'tables'])).stdout);
    const texts: string[] = [];
    for (const family of tables)
      texts.push((await this.runner.run('nft', ['-j', 'list', 'table', family, FENCE_TABLE])).stdout);
    return texts;
  }

  /**
   * Whether the fence's interfaces are still links here (read fresh): a NIC unplugged or a VLAN
   * deleted after the fence went on leaves a chain that drops nothing (Linux ≥ 6.16 keeps it).
   */
  private async checkFenceLinks(fence: FenceSpec | undefined): Promise<void> {
    if (!fence || fence.interfaces.length === 0) {
      this.vanished = [];
      return;
    }
    const links = await this.readLinkNames();
    // Unreadable: what was known stays.
    if (links === null) return;
    this.links = links;
    this.vanished = fence.interfaces.filter((i) => !links.includes(i));
    // Routes through a vanished link are resolved again.
    for (const [target, dev] of this.routeDevs)
      if (dev && !links.includes(dev)) this.routeDevs.delete(target);
    if (this.vanished.length > 0)
      this.log.warn(
        { interfaces: this.vanished },
        'fenced interfaces are no longer on this node: their fence drops nothing',
      );
  }

  async applyFence(spec: FenceSpec | undefined): Promise<FenceSpec | undefined> {
    // VIPs still held that the kernel saw claimed stay dropped: the transaction keeps the
    // installed claimed sets in place (fence-update.ts), so a claim made after this read survives.
    // The claims read are added again too: a no-op on a kept set, what the old table had on a new
    // one. (The links are read just below: no link check here.)
    const texts = spec?.held ? await this.listFenceTables().catch(() => undefined) : undefined;
    const installed = texts ? installedFence(texts) : {};
    const claimed = texts ? parseFence(texts)?.claimed : undefined;
    // A claim must come from another host: this node's own frames reflected back do not count.
    const ownMacs = spec?.held ? await this.linkMacs(spec.interfaces) : undefined;
    const full = spec && {
      ...spec,
      ...(claimed ? { claimed } : {}),
      ...(ownMacs?.length ? { ownMacs } : {}),
    };
    const nft = (input: string) =>
      this.runner.run('nft', ['-f', '-'], { input, mutates: true, timeoutMs: 5_000 });
    const input = full ? renderFence(full, installed) : renderUnfence();
    const replace = full ? renderFence(full) : input;
    const r = await nft(input).catch((e: unknown) => {
      // A claimed set nft will not keep (declared otherwise by another version): the fence must
      // still change, replaced whole with the claims as read.
      if (input === replace) throw e;
      this.log.warn({ err: (e as Error).message }, 'cannot keep the claimed sets: fence replaced whole');
      return nft(replace);
    });
    // Observe-only: nothing ran; what it would be.
    if (r.skipped) return spec;
    return this.readFence();
  }

  /** The links the routes to these targets (VIPs, or 'default') go out of, resolved once each. */
  async routeDevices(targets: readonly string[]): Promise<string[]> {
    for (const t of targets) if (!this.routeDevs.has(t)) this.routeDevs.set(t, await this.routeDevice(t));
    return [
      ...new Set(targets.map((t) => this.routeDevs.get(t)).filter((d): d is string => d !== undefined)),
    ];
  }

  async fenceLinks(plan: LinkPlan): Promise<FenceLinks> {
    const gone = this.vanished;
    const routed = async (targets: readonly string[]) =>
      (await this.routeDevices(targets)).filter((d) => !gone.includes(d));
    const withGone = (missing: string[]) => [...new Set([...missing, ...gone])];
    const always = [...(await routed(plan.always)), ...plan.kept.filter((k) => !gone.includes(k))];
    const fenced = (links: string[]) => [...new Set([...links, ...always])];
    if (plan.named.length === 0)
      return { interfaces: fenced(await routed(plan.targets)), missing: withGone([]) };
    if (this.links === undefined) this.links = await this.readLinkNames();
    const links = this.links;
    // Unreadable: fence what is named, as before the check (nft fails or drops nothing on a missing one).
    if (links === null) return { interfaces: fenced([...plan.named]), missing: [] };
    const present = plan.named.filter((n) => links.includes(n));
    const missing = plan.named.filter((n) => !links.includes(n));
    return {
      interfaces: fenced(present.length > 0 ? present : await routed(plan.targets)),
      missing: withGone(missing),
    };
  }

  forgetRoutes(): void {
    this.routeDevs.clear();
    this.links = undefined;
    this.vanished = [];
  }

  private async linkMacs(names: readonly string[]): Promise<string[]> {
    try {
      return linkAddresses((await this.runner.run('ip', ['-j', 'link', 'show'])).stdout, names);
    } catch {
      return [];
    }
  }

  private async readLinkNames(): Promise<string[] | null> {
    try {
      return linkNames((await this.runner.run('ip', ['-j', 'link', 'show'])).stdout);
    } catch (e) {
      this.log.warn(
        { err: (e as Error).message },
        "cannot read the node's links: fencing the interfaces named without checking they exist",
      );
      return null;
    }
  }

  /**
   * The link a VIP's route (or, for 'default', the default route) goes out of. A VIP bound on this
   * node (kube-proxy IPVS, kube-router) routes via lo: its ARP goes out of the link that carries
   * its subnet, or the default route's, found in the main table.
   */
  private async routeDevice(vip: string): Promise<string | undefined> {
    const args = vip === 'default' ? ['-j', 'route', 'show', 'default'] : ['-j', 'route', 'get', vip];
    try {
      const out = await this.runner.run('ip', args);
      if (vip === 'default' || !localRoute(out.stdout)) return routeDevice(out.stdout);
      const family = isIPv6(vip) ? '-6' : '-4';
      const main = await this.runner.run('ip', ['-j', family, 'route', 'show', 'table', 'main']);
      return subnetLink(vip, main.stdout);
    } catch (e) {
      this.log.warn(
        { vip, err: (e as Error).message },
        'no route to the VIP: cannot tell which link to fence',
      );
      return undefined;
    }
  }

  async ownAddresses(notOwn: readonly string[] = []): Promise<string[] | undefined> {
    try {
      return await readOwnAddresses(this.runner, notOwn);
    } catch (e) {
      this.log.warn(
        { err: (e as Error).message },
        "cannot read the node's addresses: the fail-safe fence covers only the VIPs known here",
      );
      return undefined;
    }
  }
}
