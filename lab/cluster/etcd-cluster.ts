// An etcd cluster's membership as a test or benchmark sees it, through etcd's own JSON gateway
// (the v3 gRPC API over HTTP, on every member's client URL in etcd 3.4): list, health, remove,
// add, who leads and moving the leadership.
// Debian's etcd-server package ships no etcdctl; this is what `etcdctl member list/remove` and
// `endpoint health` do, without installing it.

export interface EtcdMember {
  /** The member ID as etcd prints it in hex (etcdctl's form). */
  id: string;
  name: string;
  peerURLs: string[];
  clientURLs: string[];
}

interface RawMember {
  ID?: string;
  name?: string;
  peerURLs?: string[];
  clientURLs?: string[];
}

async function post<T>(clientURL: string, path: string, body: object, timeoutMs: number): Promise<T> {
  const res = await fetch(new URL(path, clientURL), {
    method: 'POST',
    body: JSON.stringify(body),
    headers: { 'content-type': 'application/json' },
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`etcd ${clientURL}${path}: ${res.status} ${text.trim()}`);
  return JSON.parse(text) as T;
}

/** `etcdctl member list` against one member's client URL. */
export async function memberList(clientURL: string, timeoutMs = 5_000): Promise<EtcdMember[]> {
  const r = await post<{ members?: RawMember[] }>(clientURL, '/v3/cluster/member/list', {}, timeoutMs);
  return (r.members ?? []).map((m) => ({
    // uint64 IDs arrive as decimal strings (JSON numbers would lose precision).
    id: BigInt(m.ID ?? '0').toString(16),
    name: m.name ?? '',
    peerURLs: m.peerURLs ?? [],
    clientURLs: m.clientURLs ?? [],
  }));
}

/** `etcdctl member remove <id>` (hex ID) through one member's client URL (not the one removed). */
export async function memberRemove(clientURL: string, idHex: string, timeoutMs = 10_000): Promise<void> {
  await post(clientURL, '/v3/cluster/member/remove', { ID: BigInt(`0x${idHex}`).toString() }, timeoutMs);
}

/** `etcdctl endpoint health`: the member answers /health with a committed read through raft. */
export async function memberHealthy(clientURL: string, timeoutMs = 3_000): Promise<boolean> {
  try {
    const res = await fetch(new URL('/health', clientURL), { signal: AbortSignal.timeout(timeoutMs) });
    const body = (await res.json()) as { health?: string };
    return res.ok && body.health === 'true';
  } catch {
    return false;
  }
}

/**
 * `etcdctl member add --peer-urls …` through one member's client URL: the cluster's members
 * afterwards (the new one without a name until it starts), for the new member's --initial-cluster.
 */
export async function memberAdd(
  clientURL: string,
  peerURLs: string[],
  timeoutMs = 10_000,
): Promise<EtcdMember[]> {
  await post(clientURL, '/v3/cluster/member/add', { peerURLs }, timeoutMs);
  return memberList(clientURL, timeoutMs);
}

/** The leading member's ID (hex), as one member's `etcdctl endpoint status` reports it. */
export async function leaderOf(clientURL: string, timeoutMs = 5_000): Promise<string> {
  const r = await post<{ leader?: string }>(clientURL, '/v3/maintenance/status', {}, timeoutMs);
  return BigInt(r.leader ?? '0').toString(16);
}

/** `etcdctl move-leader <id>` (hex ID): etcd accepts it only at the leader's client URL. */
export async function moveLeader(
  leaderClientURL: string,
  targetHex: string,
  timeoutMs = 10_000,
): Promise<void> {
  await post(
    leaderClientURL,
    '/v3/maintenance/transfer-leadership',
    { targetID: BigInt(`0x${targetHex}`).toString() },
    timeoutMs,
  );
}
