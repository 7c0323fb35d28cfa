// Whether a socket of this network namespace listens on a TCP port, read from the kernel's socket
// tables (/proc/self/net/tcp and tcp6) rather than by connecting: etcd logs every connection that
// ends before its TLS handshake, and this is asked every tick while a control-plane node drains.
// The kernel lists listening sockets first, so only the head of each table is read — its size
// grows with the connections on the node (an API server's clients), the head does not.
import { open } from 'node:fs/promises';
import type { LocalEtcdCheck } from './core.ts';

const LISTEN = '0A';
const TABLES = ['/proc/self/net/tcp', '/proc/self/net/tcp6'];
const CHUNK = 16 * 1024;

/**
 * One line of a /proc/net/tcp table: its local port and state, or undefined for the header and
 * anything else that is not a socket line.
 */
export function socketLine(line: string): { port: number; state: string } | undefined {
  const m =
    /^\s*\d+:\s+[0-9A-Fa-f]+:([0-9A-Fa-f]{4})\s+[0-9A-Fa-f]+:[0-9A-Fa-f]{4}\s+([0-9A-Fa-f]{2})\s/.exec(line);
  if (!m) return undefined;
  return { port: Number.parseInt(m[1] as string, 16), state: (m[2] as string).toUpperCase() };
}

/**
 * Scans complete lines of a table's head: whether one listens on `port`, and whether the listening
 * sockets are over (a socket line in another state came).
 */
export function scanListening(lines: readonly string[], port: number): { listening: boolean; done: boolean } {
  for (const line of lines) {
    const s = socketLine(line);
    if (!s) continue;
    if (s.state !== LISTEN) return { listening: false, done: true };
    if (s.port === port) return { listening: true, done: true };
  }
  return { listening: false, done: false };
}

async function tableListens(path: string, port: number): Promise<boolean> {
  const f = await open(path, 'r');
  try {
    const buf = Buffer.alloc(CHUNK);
    let rest = '';
    for (;;) {
      const { bytesRead } = await f.read(buf, 0, CHUNK, null);
      if (bytesRead === 0) return scanListening([rest], port).listening;
      const lines = (rest + buf.toString('latin1', 0, bytesRead)).split('\n');
      rest = lines.pop() ?? '';
      const r = scanListening(lines, port);
      if (r.done) return r.listening;
    }
  } finally {
    await f.close();
  }
}

/**
 * Whether anything listens on `port` here (IPv4 or IPv6): 'listening', 'gone', or 'unknown' when
 * the IPv4 table cannot be read (the IPv6 one is absent where IPv6 is off).
 */
export async function portListening(port: number): Promise<LocalEtcdCheck> {
  let read = 0;
  for (const path of TABLES) {
    try {
      if (await tableListens(path, port)) return 'listening';
      read++;
    } catch {
      if (path === TABLES[0]) return 'unknown';
    }
  }
  return read > 0 ? 'gone' : 'unknown';
}
