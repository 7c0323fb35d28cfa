// A node and another host across one link (two network namespaces joined by a veth: eth0 on the
// node, peer0 on the far host), and what reaches the far end while a test sends: tcpdump there, and
// a marker frame sent last and never fenced, so the count is complete once the marker is captured
// (no sleep). The far host is a namespace of its own: frames it sends come from addresses and MACs
// that are not the node's, as another node's takeover does.
import { createNamespace, type Netns } from '../../../lab/bed/netns.ts';
import { waitFor } from '../../../shared/clock.ts';

export type Host = Netns & { destroy(): Promise<void> };

/** The node (eth0: 192.0.2.1/24, 2001:db8::1/64) and the far host (peer0: .2, ::2). */
export async function linkedHosts(label: string): Promise<{ node: Host; far: Host }> {
  const node = await createNamespace(label);
  const far = await createNamespace(`${label}far`);
  await node.run(['ip', 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'peer0', 'netns', far.ns]);
  for (const [h, dev, n] of [
    [node, 'eth0', 1],
    [far, 'peer0', 2],
  ] as const) {
    await h.run(['sysctl', '-qw', 'net.ipv6.conf.all.accept_dad=0', 'net.ipv6.conf.default.accept_dad=0']);
    await h.run(['ip', 'link', 'set', dev, 'up']);
    await h.run(['ip', 'addr', 'add', `192.0.2.${n}/24`, 'dev', dev]);
    await h.run(['ip', 'addr', 'add', `2001:db8::${n}/64`, 'dev', dev, 'nodad']);
  }
  return { node, far };
}

export const WIRE = new URL('../../../lab/sim/speaker/wire.py', import.meta.url).pathname;
/** A GARP sender address no fence here ever names: the capture's end-of-test marker. */
const MARKER = '192.0.2.250';
/** The marker's ARP sender IP (offset 14 in the ARP header) is captured whatever the filter. */
const MARKER_FILTER = 'arp and arp[14:4] = 0xc00002fa';

/**
 * Frames matching `filter` captured on `at`'s `iface` while `send` runs twice; the marker goes out
 * of `from`'s `fromIface` after them.
 */
export async function framesSeen(
  at: { ns: Netns; iface: string },
  from: { ns: Netns; iface: string },
  filter: string,
  send: () => Promise<unknown>,
): Promise<number> {
  const cap = at.ns.spawn(['tcpdump', '-l', '-n', '-i', at.iface, `(${filter}) or (${MARKER_FILTER})`], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  cap.stdout?.on('data', (c: Buffer) => {
    out += c.toString();
  });
  cap.stderr?.on('data', (c: Buffer) => {
    err += c.toString();
  });
  try {
    await waitFor('tcpdump listening', () => err.includes('listening on'), { timeoutMs: 10_000 });
    await send();
    await send();
    await from.ns.run(['python3', WIRE, 'send-garp', from.iface, MARKER]);
    await waitFor('marker frame captured', () => out.includes(MARKER), { timeoutMs: 10_000 });
  } finally {
    cap.kill('SIGKILL');
  }
  return out.split('\n').filter((l) => l.trim() !== '' && !l.includes(MARKER)).length;
}

/** tcpdump filters: ARP with this IPv4 sender, and any neighbour advertisement. */
export const arpFrom = (ip: string) =>
  `arp and arp[14:4] = 0x${ip
    .split('.')
    .map((o) => Number(o).toString(16).padStart(2, '0'))
    .join('')}`;
export const NA_FILTER = 'icmp6 and ip6[40] == 136';
