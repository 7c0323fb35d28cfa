// One trial on the lab cluster (I/O): the scene at rest → the action and the nemesis's faults at
// their planned moments → the settle (faults lifted, every node uncordoned, the scene at rest
// again) → the observations → the checks. Times in the observations are ms from the action.
import { probeRounds } from '../../lab/bed/arp-probe.ts';
import { webhookRolledOut } from '../../lab/cluster/install.ts';
import {
  containerLogLines,
  containers,
  leftovers,
  podsIn,
  RENEW_AFTER_RESTARTS,
  RENEW_DEADLINE_MS,
  renewWornPods,
  type Scene,
  SITE_NS,
  SPEAKER_NS,
  sceneReady,
} from '../../lab/cluster/robustness-scene.ts';
import { waitFor } from '../../shared/clock.ts';
import { blindOwnerMs, checkAll, trialFigures } from './checks.ts';
import { inject, type Lift, NotInjected, type Target } from './nemesis.ts';
import { type Planted, plantRules, rulesAfter } from './netfilter.ts';
import {
  type ContainerRecord,
  fencesAsCounted,
  type LogLine,
  type RunnerUncordon,
  type SpeakerStop,
  type TrialObservations,
} from './observations.ts';
import { record } from './observe.ts';
import { describePlan, faultSpec, type TrialPlan } from './plan.ts';
import type { TrialResult } from './report.ts';

export interface TrialContext {
  tokens: string[];
  /** Log lines already checked, per log file (each trial checks only what is new). */
  logsSeen: Map<string, number>;
  /** The live pods' rules the previous trial planted (checked again before this one plants). */
  planted?: Planted[];
  note(line: string): void;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function newLogLines(s: Scene, seen: Map<string, number>): LogLine[] {
  const byFile = new Map<string, LogLine[]>();
  for (const l of containerLogLines(s.c)) byFile.set(l.source, [...(byFile.get(l.source) ?? []), l]);
  const out: LogLine[] = [];
  for (const [file, lines] of byFile) {
    out.push(...lines.slice(seen.get(file) ?? 0));
    seen.set(file, lines.length);
  }
  return out;
}

/** fn's answer once the API gives one (within 60 s: the longest an injected outage lasts, and more). */
async function untilAnswered<T>(fn: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      return await fn();
    } catch (e) {
      if (Date.now() > deadline) throw e;
      await sleep(500);
    }
  }
}

export async function runTrial(
  s: Scene,
  plan: TrialPlan,
  ctx: TrialContext,
): Promise<{ result: TrialResult; observations?: TrialObservations }> {
  const { c } = s;
  const note = (l: string) => ctx.note(`trial ${plan.trial}: ${l}`);
  const drained = plan.action === 'drain' || plan.action === 'uncordon-mid-handover';
  const base = { plan, drained, darkMs: 0, dualMs: 0, violations: [] };
  note(describePlan(plan));
  let ready: Awaited<ReturnType<typeof sceneReady>>;
  try {
    ready = await sceneReady(s, 180_000);
  } catch (e) {
    return {
      result: { ...base, error: `the scene was not at rest before the trial: ${(e as Error).message}` },
    };
  }
  try {
    const renewed = await renewWornPods(s);
    if (renewed.length > 0) {
      note(
        `fresh pods for ${renewed.join(', ')} (a container restarted ${RENEW_AFTER_RESTARTS}+ times: crash backoff)`,
      );
      ready = await sceneReady(s, 180_000);
    }
  } catch (e) {
    return {
      result: {
        ...base,
        error: `the scene was not at rest after renewing worn pods: ${(e as Error).message}`,
      },
    };
  }
  // Log lines of earlier trials are theirs.
  newLogLines(s, ctx.logsSeen);
  const node = plan.subject === 'vip-owner' ? ready.owner : (ready.leader.spec.nodeName as string);
  const other = s.nodes.find((n) => n !== node) as string;
  const leaderName = ready.leader.metadata.name;
  // Looked up when a fault strikes, maybe while another fault keeps the API away: retried.
  const speaker = () =>
    untilAnswered(async () =>
      (await podsIn(s, SPEAKER_NS)).find((p) => p.spec.nodeName === node && !p.metadata.deletionTimestamp),
    );
  const leaderPod = () =>
    untilAnswered(async () => (await podsIn(s, SITE_NS)).find((p) => p.metadata.name === leaderName));
  const actingPod =
    plan.action === 'delete-leader-pod' || plan.subject === 'lease-holder' ? leaderPod : speaker;
  const injectedRestarts: string[] = [];
  const target: Target = { c, node, other, pod: actingPod, speaker, injectedRestarts, note };
  const before = await containers(s);
  const { planted, between, goneCleaned } = await plantRules(s, ctx.planted);
  note(
    `netfilter: per-pod rules of ${planted.length} live pod(s), and of a gone pod on every node${ctx.planted ? ` (the cleanup had removed the last ones on ${goneCleaned} of ${s.nodes.length})` : ''}`,
  );
  ctx.planted = planted;
  note(
    `acting on ${node} (VIP on ${ready.owner}, Lease held by ${leaderName} on ${ready.leader.spec.nodeName})`,
  );

  const rec = record(s);
  await waitFor('a second of probes', () => rec.arp.length >= 20, { timeoutMs: 30_000, intervalMs: 100 });
  const t0 = Date.now();
  const rel = (t: number) => t - t0;
  const marks: { t: number; label: string }[] = [];
  const mark = (label: string) => marks.push({ t: rel(Date.now()), label });
  const errors: string[] = [];
  /** Faults that found nothing to strike (the action had already taken their target away). */
  const skipped: string[] = [];
  /** When the runner uncordoned a node: its fence is lifted on purpose from then on. */
  const uncordons: RunnerUncordon[] = [];
  const uncordoned = (nodes: string[]) => {
    for (const n of nodes) uncordons.push({ node: n, t: rel(Date.now()) });
  };
  const lifts: Lift[] = [];
  const pending: Promise<unknown>[] = [];
  /** Paths to the API cut (`to` set by the lift) and speakers stopped: a blind VIP owner (checks.ts). */
  const apiCuts: { node: string; from: number; to?: number }[] = [];
  const speakerStops: SpeakerStop[] = [];
  /** The API and kubelet outages injected and not yet lifted: each settles when its lift has run. */
  const outages = { api: new Set<Promise<void>>(), kubelet: new Set<Promise<void>>() };
  const trackOutage = (of: Set<Promise<void>>, lift: Lift): Lift => {
    let over!: () => void;
    const p = new Promise<void>((r) => {
      over = r;
    });
    of.add(p);
    return async () => {
      try {
        await lift();
      } finally {
        of.delete(p);
        over();
      }
    };
  };

  mark(plan.action);
  if (drained) {
    pending.push(
      c.kubectl(['drain', node, '--ignore-daemonsets', '--delete-emptydir-data', '--force', '--timeout=90s']),
    );
    if (plan.uncordonAtMs !== undefined)
      pending.push(
        sleep(plan.uncordonAtMs).then(async () => {
          mark('uncordon');
          uncordoned([node]);
          await c.kubectl(['uncordon', node]);
        }),
      );
  } else {
    const p = await actingPod();
    if (!p) errors.push(`no pod to delete for ${plan.action}`);
    else
      pending.push(c.kubectl(['delete', 'pod', '-n', p.metadata.namespace, p.metadata.name, '--wait=false']));
  }
  for (const f of plan.faults)
    pending.push(
      sleep(f.atMs).then(async () => {
        mark(f.kind);
        if (f.kind === 'uncordon-recordon') uncordoned([node]);
        try {
          // Struck through the API or the kubelet: not while another fault of this trial keeps
          // it away.
          const spec = faultSpec(f.kind);
          if (spec.needsApi) await Promise.all([...outages.api]);
          if (spec.needsKubelet) await Promise.all([...outages.kubelet]);
          const struckAt = rel(Date.now());
          let lift = await inject(f, target);
          if (f.kind === 'speaker-restart' || f.kind === 'liveness-failure')
            speakerStops.push({ node, t: struckAt });
          if (f.kind === 'api-path-drop') {
            const cut: (typeof apiCuts)[number] = { node, from: rel(Date.now()) };
            apiCuts.push(cut);
            const restore = lift;
            lift = async () => {
              await restore();
              cut.to ??= rel(Date.now());
            };
          }
          if (spec.apiOutage) lift = trackOutage(outages.api, lift);
          if (spec.kubeletOutage) lift = trackOutage(outages.kubelet, lift);
          lifts.push(lift);
          if (f.durationMs > 0 && f.kind !== 'uncordon-recordon') {
            await sleep(Math.max(0, f.atMs + f.durationMs - rel(Date.now())));
            await lift();
            mark(`${f.kind} lifted`);
          }
        } catch (e) {
          if (e instanceof NotInjected) skipped.push(`${f.kind}: ${e.message}`);
          else errors.push(`${f.kind}: ${(e as Error).message}`);
        }
      }),
    );
  await Promise.allSettled(pending);

  // The settle: every fault lifted, every node uncordoned (retried: the API may just be back).
  for (const lift of lifts) await lift().catch((e) => errors.push(`lift: ${(e as Error).message}`));
  await waitFor('every node uncordoned', async () => (await c.kubectl(['uncordon', ...s.nodes])).code === 0, {
    timeoutMs: 120_000,
    intervalMs: 1_000,
  }).then(
    // The settle's uncordon lifts every fence on purpose, as a mid-trial one does (SEED=108
    // TRIAL=89: the handback's 102 ms counted as a dual answer after a fence whose lift the poll
    // reported later).
    () => uncordoned(s.nodes),
    (e) => errors.push((e as Error).message),
  );
  const settledT = rel(Date.now());
  mark('uncordoned, faults lifted');
  await webhookRolledOut(c).catch((e) => errors.push((e as Error).message));
  const atRest = await sceneReady(s, 120_000).then(
    () => '',
    (e) => (e as Error).message,
  );
  if (atRest) note(`not at rest 120 s after the settle: ${atRest}`);
  const atRestT = rel(Date.now());
  await rec.stop();
  const settledRounds = await probeRounds(c.bed.node('client'), s.vip, 10, 50);
  const after = await containers(s);
  const containerRecords: ContainerRecord[] = [...after].map(([key, a]) => {
    const [pod, container] = key.split('/') as [string, string];
    return {
      pod,
      container,
      sidecar: a.sidecar,
      restartsBefore: before.get(key)?.restarts ?? 0,
      restartsAfter: a.restarts,
      ...(a.lastExit ? { lastExit: a.lastExit } : {}),
    };
  });
  const endT = rel(Date.now());
  const o: TrialObservations = {
    startedAt: t0,
    endT,
    settledT,
    arp: { [s.vip]: rec.arp.map((r) => ({ t: rel(r.t), nodes: r.nodes })) },
    eligible: rec.eligible.map((e) => ({ t: rel(e.t), nodes: e.nodes })),
    fences: fencesAsCounted(
      rec.fences.map((f) => ({
        node: f.node,
        t: rel(f.t),
        ...(f.liftedT === undefined ? {} : { liftedT: rel(f.liftedT) }),
      })),
      uncordons,
    ),
    holders: rec.holders.map((h) => ({ t: rel(h.t), holder: h.holder })),
    leaderEvents: rec.leaderEvents.map((e) => ({ ...e, t: rel(e.t) })),
    renewDeadlineMs: RENEW_DEADLINE_MS,
    netfilter: [...between, ...(await rulesAfter(s, planted))],
    leftovers: await leftovers(s),
    settledArp: { [s.vip]: settledRounds.map((r) => ({ t: rel(r.t), nodes: r.macs.map(s.nodeOfMac) })) },
    containers: containerRecords,
    injectedRestarts,
    logs: newLogLines(s, ctx.logsSeen),
    tokens: ctx.tokens,
    marks,
    apiCuts: apiCuts.map((cut) => ({ node: cut.node, from: cut.from, to: cut.to ?? settledT })),
    speakerStops,
  };
  const violations = checkAll(o);
  const figures = trialFigures(o);
  const secs = (ms: number) => (ms / 1000).toFixed(1);
  note(
    `${secs(settledT)} s to the settle, at rest ${secs(atRestT - settledT)} s later, ${secs(endT)} s in all; dark ${figures.darkMs} ms, dual ${figures.dualMs} ms, ${violations.length} violation(s)${errors.length ? `; errors: ${errors.join('; ')}` : ''}${skipped.length ? `; not injected: ${skipped.join('; ')}` : ''}`,
  );
  return {
    result: {
      ...base,
      darkMs: figures.darkMs,
      dualMs: figures.dualMs,
      violations,
      ...(blindOwnerMs(o) > 0 ? { blindOwnerMs: blindOwnerMs(o) } : {}),
      ...(errors.length ? { error: errors.join('; ') } : {}),
      ...(skipped.length ? { skipped } : {}),
    },
    observations: o,
  };
}
