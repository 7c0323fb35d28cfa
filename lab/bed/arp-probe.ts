// ARP probes of an IPv4 VIP, and neighbour solicitations for an IPv6 VIP, from a client namespace
// on the test switch: one round every intervalMs, each round the set of MACs that answered
// (wire.py, raw AF_PACKET). Used by the bed's L2 scene, the lab-cluster flows, the benchmarks and
// the demo. An IPv4 round is each request's own: its answers count however late they come within
// 0.5 s, so a responder held off the CPU is not a dark round, and a round is reported 0.5 s after
// it went out (IPv6: one round's interval).
import type { ChildProcess } from 'node:child_process';
import { isIPv6 } from 'node:net';
import { createInterface } from 'node:readline';
import { waitFor } from '../../shared/clock.ts';
import type { Netns } from './netns.ts';
import { START_DEADLINE_MS } from './proc.ts';

const WIRE = new URL('../sim/speaker/wire.py', import.meta.url).pathname;

export interface ProbeRound {
  t: number;
  macs: string[];
}

/** The probing client: its IPv4 address, and its IPv6 one to solicit IPv6 VIPs from. */
export type ProbeClient = Netns & { ipv4: string; ipv6?: string };

export function startArpProbe(
  client: ProbeClient,
  vip: string,
  intervalMs: number,
  onRound: (r: ProbeRound) => void,
): ChildProcess {
  const src = isIPv6(vip) ? client.ipv6 : client.ipv4;
  if (!src) throw new Error(`the probing client has no IPv6 address to solicit ${vip} from`);
  const proc = client.spawn(['python3', WIRE, 'probe', 'eth0', src, vip, String(intervalMs)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  createInterface({ input: proc.stdout! }).on('line', (l) => {
    try {
      onRound(JSON.parse(l) as ProbeRound);
    } catch {
      // not a round: ignore
    }
  });
  return proc;
}

/**
 * Waits until `rounds` holds one sent after `t`: every round before it is then in, since rounds are
 * reported once their answers are (0.5 s after they went out).
 */
export async function roundsPast(
  rounds: readonly ProbeRound[],
  t: number,
  opts: { timeoutMs: number; intervalMs?: number },
) {
  await waitFor(`probe rounds sent after ${t}`, () => rounds.some((r) => r.t > t), opts);
}

/** `rounds` rounds of probing, then the probe stops. */
export async function probeRounds(
  client: ProbeClient,
  vip: string,
  rounds: number,
  intervalMs = 50,
): Promise<ProbeRound[]> {
  const out: ProbeRound[] = [];
  const proc = startArpProbe(client, vip, intervalMs, (r) => out.push(r));
  try {
    // Starting the probe is not what is measured: under load (a clean-clone run, load average 8)
    // its first round came after the 11 s this wait once allowed in all.
    await waitFor('the first probe round', () => out.length > 0, { timeoutMs: START_DEADLINE_MS });
    await waitFor('probe rounds', () => out.length >= rounds, { timeoutMs: rounds * intervalMs + 10_000 });
  } finally {
    await stopProcess(proc, 'SIGKILL');
  }
  return out.slice(0, rounds);
}

/** The MACs that answered in these rounds. */
export const macsIn = (rounds: ProbeRound[]) => [...new Set(rounds.flatMap((r) => r.macs))].sort();

/** The longest run of consecutive rounds that `bad` holds for, in ms (rounds of roundMs each). */
function longestRun(rounds: ProbeRound[], roundMs: number, bad: (r: ProbeRound) => boolean): number {
  let run = 0;
  let worst = 0;
  for (const r of rounds) {
    run = bad(r) ? run + 1 : 0;
    worst = Math.max(worst, run);
  }
  return worst * roundMs;
}
/** The longest run of rounds nobody answered, in ms. */
export const longestDark = (rounds: ProbeRound[], roundMs: number) =>
  longestRun(rounds, roundMs, (r) => r.macs.length === 0);
/** The longest run of rounds answered by more than one MAC, in ms. */
export const longestDual = (rounds: ProbeRound[], roundMs: number) =>
  longestRun(rounds, roundMs, (r) => r.macs.length > 1);

export async function stopProcess(proc: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const done = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  try {
    // Spawned detached: SIGKILL takes the whole group (node and its python helper); a polite
    // signal goes to the process alone so it can shut down in its own order.
    if (proc.pid) process.kill(signal === 'SIGKILL' ? -proc.pid : proc.pid, signal);
  } catch {
    proc.kill(signal);
  }
  await Promise.race([done, new Promise((r) => setTimeout(r, 10_000))]);
}
