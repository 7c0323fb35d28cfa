// The ARP probe every L2 figure rests on: a responder held off the CPU for a while (a loaded test
// machine) is not a dark round, while a VIP nobody announces for the same time is. Before each
// answer was matched to its request, a 300 ms stall read as about six dark rounds: the lab
// cluster's drain flow failed on it under `make test`'s load on two cores.
import t from 'tap';
import { type ProbeRound, startArpProbe, stopProcess } from '../../../lab/bed/arp-probe.ts';
import { createTestBed, type TestBed } from '../../../lab/bed/netns.ts';
import { waitFor } from '../../../shared/clock.ts';

const WIRE = new URL('../../../lab/sim/speaker/wire.py', import.meta.url).pathname;
const T = { timeoutMs: 20_000 };
const ROUND_MS = 50;

let bed: TestBed;
t.before(async () => {
  bed = await createTestBed({ nodes: ['node-a', 'node-b', 'client'] });
});
t.teardown(async () => {
  await bed?.destroy();
});

/** The simulator's responder on a node, told which VIPs to answer on its stdin. */
function responder(node = 'node-a') {
  const proc = bed.node(node).spawn(['python3', WIRE, 'speaker', 'eth0'], {
    stdio: ['pipe', 'ignore', 'inherit'],
  });
  return { proc, vips: (...v: string[]) => proc.stdin?.write(`vips ${v.join(' ')}\n`) };
}

/** Probes the VIP while `during` runs; the rounds sent from its start to 1 s after its end. */
async function probed(vip: string, during: () => Promise<void>): Promise<ProbeRound[]> {
  const rounds: ProbeRound[] = [];
  const probe = startArpProbe(bed.node('client'), vip, ROUND_MS, (r) => rounds.push(r));
  try {
    await waitFor('ten answered rounds', () => rounds.filter((r) => r.macs.length > 0).length >= 10, T);
    const started = Date.now();
    await during();
    const ended = Date.now();
    // Every round sent until 1 s after `during` is in (its answers are waited 0.5 s).
    await waitFor('the rounds after it', () => rounds.some((r) => r.t > ended + 1000), T);
    return rounds.filter((r) => r.t >= started && r.t <= ended + 1000);
  } finally {
    await stopProcess(probe, 'SIGKILL');
  }
}

const dark = (rounds: ProbeRound[]) => rounds.filter((r) => r.macs.length === 0).length;

t.test('a responder stopped 300 ms answers late, and no round reads dark', async (t) => {
  const vip = bed.addr4(100);
  const r = responder();
  try {
    r.vips(vip);
    const rounds = await probed(vip, async () => {
      r.proc.kill('SIGSTOP');
      // The stall itself is what is measured: nothing to wait on but the clock.
      await new Promise((res) => setTimeout(res, 300));
      r.proc.kill('SIGCONT');
    });
    t.ok(rounds.length >= 20, `rounds during and after the stall (${rounds.length})`);
    t.equal(dark(rounds), 0, 'every request was answered, some late');
  } finally {
    r.proc.kill('SIGKILL');
  }
});

t.test('a VIP withdrawn for 300 ms reads as dark rounds, about as many as it was dark', async (t) => {
  const vip = bed.addr4(101);
  const r = responder();
  try {
    r.vips(vip);
    const rounds = await probed(vip, async () => {
      r.vips();
      await new Promise((res) => setTimeout(res, 300));
      r.vips(vip);
    });
    const d = dark(rounds);
    t.ok(d >= 4 && d <= 10, `300 ms withdrawn: ${d} dark rounds of ${ROUND_MS} ms`);
  } finally {
    r.proc.kill('SIGKILL');
  }
});

t.test('answers of two nodes to one request are both counted (dual)', async (t) => {
  const vip = bed.addr4(102);
  const a = responder('node-a');
  const b = responder('node-b');
  try {
    a.vips(vip);
    b.vips(vip);
    const rounds = await probed(vip, async () => {});
    t.ok(
      rounds.length > 0 && rounds.every((r) => r.macs.length === 2),
      `every round answered by both (${rounds.map((r) => r.macs.length).join(',')})`,
    );
  } finally {
    a.proc.kill('SIGKILL');
    b.proc.kill('SIGKILL');
  }
});
