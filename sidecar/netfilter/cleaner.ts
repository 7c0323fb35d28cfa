// One cleanup pass at a time: read the host through the ToolRunner, decide (pure), confirm
// (two passes), re-list, delete in one batch. Shared by the sidecar feature and the CLI.
import type { Clock } from '../../shared/clock.ts';
import type { Logger } from '../../shared/log.ts';
import { ToolError, type ToolRunner } from '../runner.ts';
import { ConfirmationTracker } from './confirm.ts';
import {
  type Decision,
  decide,
  type PodInfo,
  type Snapshot,
  type StaleNeighbour,
  type StaleRule,
} from './decide.ts';
import { type EbRule, type Flavour, parseFlavour, parseListing } from './ebtables.ts';
import { parseAddrs, parseFdb, parseNeighbours, parseRoutes } from './hoststate.ts';
import { alignHandles, type NftTable, parseNftTable } from './nfthandles.ts';
import { ebtablesDeleteArgs, ebtablesRestoreInput, neighbourBatchInput, nftDeleteInput } from './plan.ts';

export interface PassInput {
  pods: readonly PodInfo[];
  nodeAddresses: readonly string[];
  /**
   * Re-reads the pods right before anything is deleted, so no deletion rests on a cached view
   * (an informer that has not noticed a dead connection, a pod added since). A rejection holds
   * the pass: nothing is deleted. `holdFrom` (clock time): keys first seen stale at or after it
   * are kept, because a pod whose IP the kubelet has not written yet may own them.
   */
  recheck?: () => Promise<{ pods: readonly PodInfo[]; holdFrom?: number }>;
}

export interface PassResult {
  at: number;
  /** Stale this pass (before confirmation). */
  staleRules: StaleRule[];
  staleNeighbours: StaleNeighbour[];
  /** Confirmed and still stale on the re-list: removed (or, in dry-run, reported). */
  removedRules: StaleRule[];
  removedNeighbours: StaleNeighbour[];
  dryRun: boolean;
  /** Stale but waiting for a second sighting; earliest time a pass could confirm one. */
  pendingUntil?: number;
  /** Confirmed items were not deleted because the pods could not be re-read (why). */
  held?: string;
  /** Confirmed items kept because a pod awaiting its IP may own them. */
  heldForNewPods: number;
  errors: string[];
  decision: Decision;
}

export interface EbtablesStatus {
  flavour?: Flavour;
  usable: boolean;
  error?: string;
}

export interface CleanerOptions {
  runner: ToolRunner;
  log: Logger;
  clock: Clock;
  confirmMs: number;
  dryRun: boolean;
}

const mutating = { mutates: true, timeoutMs: 30_000 };

/** A snapshot, plus nf_tables handles of the nat PREROUTING rules when they could be proven. */
interface Listed {
  snapshot: Snapshot;
  handles?: number[];
  handleError?: string;
  /** The nat listing could not be parsed: rules were not judged. */
  ruleError?: string;
}

export class Cleaner {
  private readonly opts: CleanerOptions;
  readonly tracker: ConfirmationTracker;
  private ebtables: EbtablesStatus | undefined;

  constructor(opts: CleanerOptions) {
    this.opts = opts;
    this.tracker = new ConfirmationTracker(opts.confirmMs);
  }

  /**
   * Which ebtables answers, and whether its nat table can be listed. An unusable flavour
   * (legacy binary on a kernel without ebtable_nat, or a missing binary) disables the rule
   * half with a clear error; neighbour cleanup still runs.
   */
  async detectEbtables(): Promise<EbtablesStatus> {
    if (this.ebtables) return this.ebtables;
    const { runner } = this.opts;
    let flavour: Flavour | undefined;
    try {
      const v = await runner.run('ebtables', ['-V']);
      flavour = parseFlavour(v.stdout + v.stderr);
      if (!flavour)
        return this.remember({ usable: false, error: `ebtables -V: unknown flavour "${v.stdout.trim()}"` });
      await runner.run('ebtables', ['-t', 'nat', '-L']);
      return this.remember({ flavour, usable: true });
    } catch (e) {
      const detail = e instanceof ToolError ? e.message : String(e);
      const hint =
        flavour === 'legacy'
          ? ' (the legacy ebtables flavour needs the ebtable_nat kernel module; switch the ebtables alternative to ebtables-nft)'
          : '';
      return this.remember({
        flavour,
        usable: false,
        error: `ebtables${flavour ? ` (${flavour})` : ''} is not usable: ${detail}${hint}`,
      });
    }
  }

  private remember(s: EbtablesStatus): EbtablesStatus {
    this.ebtables = s;
    if (!s.usable) this.opts.log.error({ error: s.error }, 'ebtables rule cleanup disabled');
    return s;
  }

  /** Reads everything a decision needs; ~6 tool calls, run concurrently. */
  async snapshot(): Promise<Snapshot> {
    return (await this.snapshotWithHandles(false)).snapshot;
  }

  /**
   * With handles (nft flavour): the ebtables listing is bracketed by two
   * `nft -a list table bridge nat` listings and aligned with them (see alignHandles), so
   * each listed rule is tied to its nf_tables handle; `handles` stays undefined (with the
   * reason) when that cannot be proven, and deletion falls back to ebtables-restore.
   */
  private async snapshotWithHandles(withHandles: boolean, reuse?: Snapshot): Promise<Listed> {
    const { runner } = this.opts;
    const ebtables = await this.detectEbtables();
    const nftList = async () =>
      parseNftTable((await runner.run('nft', ['-a', 'list', 'table', 'bridge', 'nat'])).stdout);
    let handleInfo: Omit<Listed, 'snapshot' | 'ruleError'> = {};
    let ruleError: string | undefined;
    const listRules = async (): Promise<EbRule[] | undefined> => {
      if (!ebtables.usable) return undefined;
      let before: NftTable | undefined;
      if (withHandles && ebtables.flavour === 'nft')
        before = await nftList().catch((e: Error) => {
          handleInfo = { handleError: e.message };
          return undefined;
        });
      const text = (await runner.run('ebtables', ['-t', 'nat', '-L'])).stdout;
      let rules: EbRule[];
      try {
        rules = parseListing(text).rules;
      } catch (e) {
        // A listing we cannot read is no reason to skip the neighbours: judge no rules this pass.
        ruleError = `ebtables -t nat -L: ${(e as Error).message}`;
        return undefined;
      }
      if (before) {
        try {
          const aligned = alignHandles(rules, before, await nftList());
          handleInfo = typeof aligned === 'string' ? { handleError: aligned } : { handles: aligned };
        } catch (e) {
          handleInfo = { handleError: (e as Error).message };
        }
      }
      return rules;
    };
    if (reuse) {
      // A re-list: what gets deleted (rules, neighbours) is read again; addresses, routes and
      // the FDB were read by the same pass milliseconds ago.
      const [rules, neigh] = await Promise.all([listRules(), runner.run('ip', ['-j', 'neigh', 'show'])]);
      return {
        snapshot: { ...reuse, ...(rules ? { rules } : {}), neighbours: parseNeighbours(neigh.stdout) },
        ...handleInfo,
        ...(ruleError ? { ruleError } : {}),
      };
    }
    const [rules, addrs, neigh, r4, r6, fdb] = await Promise.all([
      listRules(),
      runner.run('ip', ['-d', '-j', 'addr', 'show']),
      runner.run('ip', ['-j', 'neigh', 'show']),
      runner.run('ip', ['-j', 'route', 'show', 'table', 'main']),
      runner.run('ip', ['-j', '-6', 'route', 'show', 'table', 'main']),
      // No bridge on the host is fine: an empty FDB.
      runner.run('bridge', ['-j', 'fdb', 'show']).catch(() => ({ stdout: '[]' })),
    ]);
    return {
      snapshot: {
        ...(rules ? { rules } : {}),
        ifaces: parseAddrs(addrs.stdout),
        neighbours: parseNeighbours(neigh.stdout),
        routes: [...parseRoutes(r4.stdout, 4), ...parseRoutes(r6.stdout, 6)],
        fdb: parseFdb(fdb.stdout),
      },
      ...handleInfo,
      ...(ruleError ? { ruleError } : {}),
    };
  }

  /** One pass: list, decide, confirm, re-list, delete what is confirmed and still stale. */
  async pass(input: PassInput): Promise<PassResult> {
    const { clock, log } = this.opts;
    const at = clock.now();
    const firstListed = await this.snapshotWithHandles(false);
    const first = firstListed.snapshot;
    const decision = decide({ snapshot: first, ...input });
    const confirmed = this.tracker.observe(at, [
      ...decision.staleRules.map((r) => r.key),
      ...decision.staleNeighbours.map((n) => n.key),
    ]);
    const result: PassResult = {
      at,
      staleRules: decision.staleRules,
      staleNeighbours: decision.staleNeighbours,
      removedRules: [],
      removedNeighbours: [],
      dryRun: this.opts.dryRun || this.opts.runner.observeOnly,
      errors: firstListed.ruleError ? [firstListed.ruleError] : [],
      heldForNewPods: 0,
      decision,
    };
    const dueThisPass = new Set(confirmed);
    let current: PassInput = input;
    if (confirmed.size > 0 && input.recheck) {
      try {
        const again = await input.recheck();
        current = { ...input, pods: again.pods };
        if (again.holdFrom !== undefined) {
          const holdFrom = again.holdFrom;
          for (const k of [...confirmed])
            if ((this.tracker.firstSeen(k) ?? at) >= holdFrom) {
              confirmed.delete(k);
              result.heldForNewPods++;
            }
        }
      } catch (e) {
        result.held = `pods could not be re-read before deleting (${(e as Error).message}); nothing deleted`;
        confirmed.clear();
      }
    }
    if (confirmed.size > 0) {
      // Re-list right before deleting: act only on what is still there and still stale.
      const relist = await this.snapshotWithHandles(!result.dryRun, first);
      const fresh = decide({ snapshot: relist.snapshot, ...current });
      const rules = fresh.staleRules.filter((r) => confirmed.has(r.key));
      const neighbours = fresh.staleNeighbours.filter((n) => confirmed.has(n.key));
      if (result.dryRun) {
        result.removedRules = rules;
        result.removedNeighbours = neighbours;
      } else {
        result.removedRules = await this.deleteRules(rules, relist, current, confirmed, result.errors);
        result.removedNeighbours = await this.deleteNeighbours(neighbours, result.errors);
        this.tracker.forget([
          ...result.removedRules.map((r) => r.key),
          ...result.removedNeighbours.map((n) => n.key),
        ]);
      }
      for (const r of result.removedRules)
        log.info(
          { rule: r.rule.spec, chain: r.rule.chain, reason: r.reason, dryRun: result.dryRun },
          'stale ebtables rule',
        );
      for (const n of result.removedNeighbours)
        log.info(
          { ip: n.neighbour.ip, dev: n.neighbour.dev, reason: n.reason, dryRun: result.dryRun },
          'stale neighbour',
        );
    }
    // Only what is not yet confirmable: items confirmed but kept (held, failed) wait for the
    // next trigger (pod event, resync) instead of a tight loop of passes.
    const pending = this.tracker
      .pending()
      .filter((p) => !dueThisPass.has(p.key))
      .map((p) => p.confirmableAt);
    if (pending.length) result.pendingUntil = Math.min(...pending);
    return result;
  }

  private async deleteRules(
    rules: StaleRule[],
    listed: Omit<Listed, 'snapshot'>,
    input: PassInput,
    confirmed: Set<string>,
    errors: string[],
  ): Promise<StaleRule[]> {
    if (rules.length === 0) return [];
    const { runner, log } = this.opts;
    if (listed.handles) {
      try {
        await runner.run('nft', ['-f', '-'], { ...mutating, input: nftDeleteInput(rules, listed.handles) });
        return rules;
      } catch (e) {
        // One transaction, so nothing was deleted; a handle is gone (the chain changed). By spec instead.
        log.warn({ err: (e as Error).message }, 'nft handle batch failed; deleting by spec instead');
      }
    } else if (listed.handleError && this.ebtables?.flavour === 'nft') {
      log.info({ why: listed.handleError }, 'rule handles not proven; deleting by spec (ebtables-restore)');
    }
    if (this.ebtables?.flavour === 'legacy') {
      // Not verifiable on kernels without legacy tables: use exact per-rule deletes here.
      const done: StaleRule[] = [];
      for (const r of rules) {
        try {
          await runner.run('ebtables', ebtablesDeleteArgs(r), mutating);
          done.push(r);
        } catch (e) {
          errors.push((e as Error).message);
        }
      }
      return done;
    }
    const restore = (batch: StaleRule[]) =>
      runner.run('ebtables-restore', ['--noflush'], { ...mutating, input: ebtablesRestoreInput(batch) });
    try {
      await restore(rules);
      return rules;
    } catch (e) {
      // The batch is all-or-nothing: something changed since the re-list. Re-list once and retry.
      this.opts.log.warn(
        { err: (e as Error).message },
        'ebtables batch failed; re-listing and retrying once',
      );
      const again = decide({ snapshot: await this.snapshot(), ...input }).staleRules.filter((r) =>
        confirmed.has(r.key),
      );
      if (again.length === 0) return [];
      try {
        await restore(again);
        return again;
      } catch (e2) {
        errors.push(`ebtables-restore --noflush: ${(e2 as Error).message}`);
        return [];
      }
    }
  }

  private async deleteNeighbours(neighbours: StaleNeighbour[], errors: string[]): Promise<StaleNeighbour[]> {
    if (neighbours.length === 0) return [];
    const { runner } = this.opts;
    try {
      await runner.run('ip', ['-force', '-batch', '-'], {
        ...mutating,
        input: neighbourBatchInput(neighbours),
      });
      return neighbours;
    } catch (e) {
      // -force carried on past failures; report exactly the ones still present.
      errors.push((e as Error).message);
      const left = new Set(
        parseNeighbours((await runner.run('ip', ['-j', 'neigh', 'show'])).stdout).map(
          (n) => `${n.ip}|${n.dev}`,
        ),
      );
      return neighbours.filter((n) => !left.has(n.key));
    }
  }
}
