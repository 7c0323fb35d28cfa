// The speaker simulator's memberlist liveness (lab/sim/speaker/election.ts): SWIM probe/ack,
// reduced to direct probes, on plain data. A tiny in-memory network delivers the messages.
import t from 'tap';
import {
  liveMembers,
  type MemberMsg,
  type MemberView,
  newMemberView,
  probeRound,
  receive,
} from '../../../lab/sim/speaker/election.ts';

const PROBE_MS = 200;
const DEAD_MS = 5000;

/** Speakers on one segment; `drop(from, to, msg)` loses a datagram, as an nft output rule does. */
function world(names: string[]) {
  const views = new Map<string, MemberView>(names.map((n) => [n, newMemberView()]));
  const inc = new Map(names.map((n) => [n, 1]));
  const heard = new Map<string, number>(names.map((n) => [n, 0]));
  let now = 0;
  let drop: (from: string, to: string, m: MemberMsg) => boolean = () => false;
  const deliver = (from: string, to: string, m: MemberMsg) => {
    if (drop(from, to, m)) return;
    const v = views.get(to);
    if (!v) return;
    if (m.type === 'ping') heard.set(to, (heard.get(to) ?? 0) + 1);
    const reply = receive(v, to, inc.get(to) as number, m, now);
    if (reply) deliver(to, from, reply);
  };
  return {
    views,
    inc,
    heard,
    get now() {
      return now;
    },
    setDrop(d: typeof drop) {
      drop = d;
    },
    deliver,
    /** Runs probe rounds for `ms`. */
    run(ms: number) {
      for (const end = now + ms; now < end; now += PROBE_MS)
        for (const [n, v] of views)
          for (const { to, msg } of probeRound(v, n, inc.get(n) as number, names, now, DEAD_MS))
            deliver(n, to, msg);
    },
    live: (n: string) => [...liveMembers(n, views.get(n) as MemberView, now, DEAD_MS)].sort(),
  };
}

t.test(
  'memberlist probe/ack: peers that answer our pings are alive; one that stops is dead after deadMs, not before',
  async (t) => {
    const w = world(['a', 'b', 'c']);
    w.run(1000);
    for (const n of ['a', 'b', 'c']) t.strictSame(w.live(n), ['a', 'b', 'c']);
    // c's process is gone (SIGKILL: no leave): nothing reaches it, nothing comes from it.
    w.setDrop((from, to) => from === 'c' || to === 'c');
    w.run(DEAD_MS - 2 * PROBE_MS);
    t.strictSame(w.live('a'), ['a', 'b', 'c'], 'still alive within deadMs of its last ack');
    w.run(3 * PROBE_MS);
    t.strictSame(w.live('a'), ['a', 'b']);
    t.strictSame(w.live('b'), ['a', 'b']);
  },
);

t.test(
  'memberlist probe/ack: a node whose output on 7946 is dropped hears pings, yet sees ALL peers die and every peer sees it die',
  async (t) => {
    const w = world(['a', 'b', 'c']);
    w.run(1000);
    // drainguard's fail-safe cut on c: `th dport 7946` and `th sport 7946` dropped on OUTPUT, i.e.
    // everything c sends: its pings and its acks. What the peers send still reaches it.
    w.setDrop((from) => from === 'c');
    const heardBefore = w.heard.get('c') as number;
    w.run(DEAD_MS + 2 * PROBE_MS);
    t.ok((w.heard.get('c') as number) - heardBefore > 20, 'c kept receiving pings');
    t.strictSame(w.live('c'), ['c'], 'no ack to its pings: c sees every peer dead');
    t.strictSame(w.live('a'), ['a', 'b'], "c's acks never arrive: a sees c dead");
    t.strictSame(w.live('b'), ['a', 'b']);
    // The cut lifted: one probe round later everyone is back.
    w.setDrop(() => false);
    w.run(PROBE_MS);
    for (const n of ['a', 'b', 'c']) t.strictSame(w.live(n), ['a', 'b', 'c']);
  },
);

t.test(
  'memberlist probe/ack: a node cut only in its input is dead for its peers and sees them dead too',
  async (t) => {
    const w = world(['a', 'b', 'c']);
    w.run(1000);
    w.setDrop((_from, to) => to === 'c');
    w.run(DEAD_MS + PROBE_MS);
    t.strictSame(w.live('c'), ['c']);
    t.strictSame(w.live('a'), ['a', 'b']);
  },
);

t.test('memberlist probe/ack: only an ack to one of our own pings to that node counts', async (t) => {
  const v = newMemberView();
  receive(v, 'a', 1, { type: 'ack', node: 'b', seq: 1, inc: 1 }, 0);
  t.strictSame([...liveMembers('a', v, 10, DEAD_MS)], ['a'], 'an unsolicited ack');
  const [toB] = probeRound(v, 'a', 1, ['a', 'b', 'c'], 0, DEAD_MS);
  t.equal(toB?.to, 'b');
  t.equal(toB?.msg.type, 'ping');
  const seq = toB?.msg.type === 'ping' ? toB.msg.seq : -1;
  receive(v, 'a', 1, { type: 'ack', node: 'c', seq, inc: 1 }, 5);
  t.strictSame([...liveMembers('a', v, 10, DEAD_MS)], ['a'], "c's ack to the ping sent to b");
  receive(v, 'a', 1, { type: 'ack', node: 'b', seq, inc: 1 }, 5);
  t.strictSame([...liveMembers('a', v, 10, DEAD_MS)].sort(), ['a', 'b']);
  // A ping is answered with an ack carrying its sequence number, from the receiver.
  t.strictSame(receive(v, 'a', 7, { type: 'ping', node: 'b', seq: 42, inc: 1 }, 6), {
    type: 'ack',
    node: 'a',
    seq: 42,
    inc: 7,
  });
  // Pings older than deadMs are forgotten: their late acks do not count.
  probeRound(v, 'a', 1, ['b'], 100, DEAD_MS);
  const late = v.seq;
  probeRound(v, 'a', 1, ['c'], 100 + DEAD_MS, DEAD_MS);
  receive(v, 'a', 1, { type: 'ack', node: 'b', seq: late, inc: 1 }, 100 + DEAD_MS + 1);
  t.equal(v.lastAck.get('b'), 5);
});

t.test(
  'memberlist Leave: the member is gone at once; only a newer incarnation (a restarted speaker) comes back',
  async (t) => {
    const w = world(['a', 'b', 'c']);
    w.run(1000);
    w.deliver('c', 'a', { type: 'leave', node: 'c', inc: 1 });
    w.deliver('c', 'b', { type: 'leave', node: 'c', inc: 1 });
    t.strictSame(w.live('a'), ['a', 'b'], 'no wait for deadMs');
    // An ack from the same incarnation (in flight when it left) does not revive it.
    w.run(1000);
    t.strictSame(w.live('a'), ['a', 'b']);
    // Restarted: a new incarnation answers the next ping.
    w.inc.set('c', 2);
    w.run(PROBE_MS);
    t.strictSame(w.live('a'), ['a', 'b', 'c']);
  },
);
