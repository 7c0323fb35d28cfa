// The speaker simulator answers a VIP before it says so: Wires.announce resolves only once its
// wire.py helper answers the new set, and the simulator writes ServiceL2Status after it (as
// MetalLB's in-process responder answers before its status is written). drainguard fences the old
// owner on that status, so a status ahead of a starved helper made a dark round of the lab's own:
// the lab cluster's drain flow read one under `make test` on two cores. Before the fix announce()
// returned at once, with the helper stopped.
import { readFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import t from 'tap';
import { type ProbeRound, startArpProbe, stopProcess } from '../../../lab/bed/arp-probe.ts';
import { createTestBed, type TestBed } from '../../../lab/bed/netns.ts';
import { waitFor } from '../../../shared/clock.ts';

const WIRES = new URL('../../../lab/sim/speaker/wires.ts', import.meta.url).href;
const T = { timeoutMs: 20_000 };

let bed: TestBed;
t.before(async () => {
  bed = await createTestBed({ nodes: ['node-a', 'client'] });
});
t.teardown(async () => {
  await bed?.destroy();
});

// A process in node-a's namespace holding one Wires on eth0: "announce VIP" on stdin, "announced"
// on stdout once announce() has resolved.
const HOST = `
import { createInterface } from 'node:readline';
const { Wires } = await import(${JSON.stringify(WIRES)});
const w = new Wires(['eth0'], () => {});
console.log('ready');
createInterface({ input: process.stdin }).on('line', async (l) => {
  const [cmd, vip] = l.split(' ');
  if (cmd === 'announce') {
    await w.announce(new Map([['eth0', new Set([vip])]]));
    console.log('announced');
  }
});
`;

t.test('announce() resolves once the helper answers: a stopped helper holds it back', async (t) => {
  const vip = bed.addr4(100);
  const host = bed.node('node-a').spawn([process.execPath, '--input-type=module', '-e', HOST], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines: string[] = [];
  createInterface({ input: host.stdout! }).on('line', (l) => lines.push(l));
  try {
    await waitFor('the host ready', () => lines.includes('ready'), T);
    // The helper is the host's only child.
    const helper = await waitFor(
      'the wire.py helper',
      async () => (await readFile(`/proc/${host.pid}/task/${host.pid}/children`, 'utf8')).trim(),
      T,
    );
    process.kill(Number(helper), 'SIGSTOP');
    host.stdin?.write(`announce ${vip}\n`);
    // The stall is the stimulus: nothing to wait on but the clock.
    await new Promise((res) => setTimeout(res, 300));
    t.notOk(lines.includes('announced'), 'not announced while the helper cannot answer');
    process.kill(Number(helper), 'SIGCONT');
    await waitFor('announced', () => lines.includes('announced'), T);
    // Announced means answered: the very first request after it gets its answer.
    const rounds: ProbeRound[] = [];
    const probe = startArpProbe(bed.node('client'), vip, 50, (r) => rounds.push(r));
    try {
      await waitFor('the first round', () => rounds.length > 0, T);
      t.ok(rounds[0]?.macs.length === 1, `the first request is answered (${JSON.stringify(rounds[0])})`);
    } finally {
      await stopProcess(probe, 'SIGKILL');
    }
  } finally {
    await stopProcess(host, 'SIGKILL');
  }
});
