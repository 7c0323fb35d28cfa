import t from 'tap';
import { createTestBed, sh, type TestBed } from '../../../lab/bed/netns.ts';
import { waitFor } from '../../../shared/clock.ts';

let bed: TestBed;
t.before(async () => {
  bed = await createTestBed({ nodes: ['node-a', 'node-b'], hostLink: true });
});
t.teardown(async () => {
  await bed?.destroy();
});

t.test('nodes on the switch reach each other and the host link', async (t) => {
  const a = bed.node('node-a');
  const b = bed.node('node-b');
  t.equal((await a.exec(['ping', '-c1', '-W2', b.ipv4])).code, 0);
  t.equal((await b.exec(['ping', '-c1', '-W2', bed.hostIPv4!])).code, 0);
  t.equal((await a.exec(['ping', '-6', '-c1', '-W2', b.ipv6])).code, 0);
});

t.test(
  'an ARP reply sent with arping -A arrives at a peer, then an nft netdev egress rule drops it',
  async (t) => {
    const a = bed.node('node-a');
    const b = bed.node('node-b');
    // Capture ARP replies from node-a's MAC on node-b, counting what arrives.
    const countReplies = async () => {
      const cap = b.spawn(['tcpdump', '-l', '-n', '-i', 'eth0', '-c', '1', 'arp and ether src', a.mac], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const exited = new Promise((r) => cap.once('exit', r));
      let seen = '';
      cap.stdout?.on('data', (d: Buffer) => {
        seen += d.toString();
      });
      let listening = false;
      cap.stderr?.on('data', (d: Buffer) => {
        if (d.toString().includes('listening')) listening = true;
      });
      await waitFor('tcpdump listening', () => listening, { timeoutMs: 10_000 });
      // -A: unsolicited ARP reply for node-a's own address (what a speaker sends on takeover).
      await a.exec(['arping', '-A', '-c', '3', '-w', '3', '-I', 'eth0', a.ipv4]);
      if (cap.exitCode === null) cap.kill('SIGINT');
      await exited;
      return seen;
    };
    t.match(await countReplies(), /Reply/, 'the ARP reply reaches the peer without a fence');

    await a.run(['nft', '-f', '-'], {
      input: `table netdev dgtest {
  chain egress { type filter hook egress device "eth0" priority 0; policy accept;
    arp operation reply counter drop
  }
}`,
    });
    t.equal((await countReplies()).trim(), '', 'nothing arrives once the egress rule drops it');
    const list = await a.run(['nft', '-j', 'list', 'chain', 'netdev', 'dgtest', 'egress']);
    const counter = (
      JSON.parse(list) as { nftables: { rule?: { expr: { counter?: { packets: number } }[] } }[] }
    ).nftables
      .flatMap((x) => x.rule?.expr ?? [])
      .find((e) => e.counter)?.counter;
    t.ok((counter?.packets ?? 0) >= 1, `counter moved: ${JSON.stringify(counter)}`);
  },
);

t.test('namespaces of this run are removed by destroy', async (t) => {
  const extra = await createTestBed({ nodes: ['x'] });
  const ns = extra.node('x').ns;
  await extra.destroy();
  const list = await sh(['ip', 'netns', 'list']);
  t.ok(!list.stdout.includes(ns));
});
