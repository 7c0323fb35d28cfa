import { createServer } from 'node:net';
import t from 'tap';
import { portListening, scanListening, socketLine } from '../../../../sidecar/api-fence/listening-port.ts';

// Lines as the kernel writes them (Linux 6.x), listening sockets first.
const HEADER =
  '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode';
const LISTEN_2379 =
  '   0: 0100007F:094B 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1137 1 0000000060f22da4 100 0 0 10 0';
const LISTEN_6443 =
  '   1: 00000000:192B 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1138 1 0000000060f22da5 100 0 0 10 0';
const ESTABLISHED_FROM_2379 =
  '   2: 0100007F:094B 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 1139 1 0000000060f22da6 20 4 30 10 -1';
const LISTEN6_2379 =
  '   0: 00000000000000000000000001000000:094B 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2001 1 0000000000000000 100 0 0 10 0';

t.test('a socket line: its local port and state', async (t) => {
  t.equal(socketLine(HEADER), undefined);
  t.strictSame(socketLine(LISTEN_2379), { port: 2379, state: '0A' });
  t.strictSame(socketLine(ESTABLISHED_FROM_2379), { port: 2379, state: '01' });
  t.strictSame(socketLine(LISTEN6_2379), { port: 2379, state: '0A' }, 'IPv6');
  t.equal(socketLine(''), undefined);
});

t.test('only the listening head is scanned: a connection from the port is no listener', async (t) => {
  t.strictSame(scanListening([HEADER, LISTEN_6443, LISTEN_2379], 2379), { listening: true, done: true });
  t.strictSame(scanListening([HEADER, LISTEN_6443], 2379), { listening: false, done: false }, 'read on');
  t.strictSame(
    scanListening([HEADER, LISTEN_6443, ESTABLISHED_FROM_2379, LISTEN_2379], 2379),
    { listening: false, done: true },
    'past the listeners: a connected socket on 2379 (a member gone, its clients lingering) is not one',
  );
});

t.test("this namespace's sockets, read from the kernel: listening, then gone", async (t) => {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const port = (server.address() as { port: number }).port;
  t.equal(await portListening(port), 'listening');
  await new Promise<void>((done) => server.close(() => done()));
  t.equal(await portListening(port), 'gone', 'closed: nothing listens');
});
