// Fuzz: generated and mutated AdmissionReviews (structure-aware mutations plus raw byte damage).
// Never a 5xx, never a crash, every returned patch applies to its pod. FUZZ_RUNS / FUZZ_SEED to vary.
import t from 'tap';
import { appFor, applyPatch, baseOptions, decode } from '../../../lab/fake/webhook.ts';
import { hugePod, review, skupperPod, speakerPod } from './fixtures.ts';

const RUNS = Number(process.env.FUZZ_RUNS ?? 10_000);
const SEED = Number(process.env.FUZZ_SEED ?? 20261122);

function prng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = a;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

type J = unknown;
const KEYS = [
  'drainguard.io/profile',
  'drainguard.io/port',
  'drainguard.io/sidecar-mode',
  'drainguard.io/leases',
  'drainguard.io/leader-container',
  'drainguard.io/guarded-container',
  'drainguard.io/netfilter-cleanup',
  'drainguard.io/handover-budget-seconds',
  'drainguard.io/observe-only',
  'drainguard.io/memberlist-ports',
  'drainguard.io/status',
  'drainguard.io/inject',
  'app.kubernetes.io/name',
  'app.kubernetes.io/component',
  'skupper.io/component',
  'a~b/c',
  '',
];
const VALUES = [
  'metallb-speaker',
  'skupper-router',
  'lease',
  'netfilter-cleanup',
  'native',
  'classic',
  'auto',
  'true',
  'false',
  '7480',
  '7946',
  '0',
  '-1',
  '99999',
  'a,b',
  'ns/lease',
  'speaker',
  'kube-adaptor',
  'metallb',
  'router',
  'disabled',
  '~/',
  '',
  'x'.repeat(300),
];

function gen(r: () => number) {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)] as T;
  const scalar = (): J =>
    pick<() => J>([
      () => null,
      () => r() < 0.5,
      () => Math.floor(r() * 70000) - 100,
      () => pick(VALUES),
      () => [],
      () => ({}),
      () => [pick(VALUES)],
      () => ({ [pick(KEYS)]: pick(VALUES) }),
    ])();
  /** Every path to a value in doc, so mutations reach deep fields too. */
  const paths = (doc: J, prefix: (string | number)[] = [], out: (string | number)[][] = []) => {
    out.push(prefix);
    if (out.length > 400) return out;
    if (Array.isArray(doc)) {
      for (const [i, v] of doc.entries()) paths(v, [...prefix, i], out);
    } else if (doc && typeof doc === 'object')
      for (const [k, v] of Object.entries(doc)) paths(v, [...prefix, k], out);
    return out;
  };
  const setAt = (doc: Record<string, J>, path: (string | number)[], v: J | undefined) => {
    let cur: J = doc;
    for (const p of path.slice(0, -1)) cur = (cur as Record<string, J>)[p as string];
    const last = path.at(-1)!;
    if (v === undefined) {
      if (Array.isArray(cur)) cur.splice(Number(last), 1);
      else delete (cur as Record<string, J>)[last as string];
    } else (cur as Record<string, J>)[last as string] = v;
  };
  return { pick, scalar, paths, setAt };
}

t.test(`fuzz: ${RUNS} generated and mutated AdmissionReviews`, async (t) => {
  const r = prng(SEED);
  const g = gen(r);
  const bases = [speakerPod, skupperPod, () => hugePod(50)];
  const apps = [
    appFor(baseOptions()),
    appFor(baseOptions({ kubeletVersions: undefined })),
    appFor(baseOptions({ mode: 'native' })),
  ];
  let patched = 0;
  let denied = 0;
  let bad = 0;
  for (let i = 0; i < RUNS; i++) {
    const pod = g.pick(bases)() as Record<string, J>;
    const rev = review(pod) as Record<string, J>;
    const req = rev.request as Record<string, J>;
    // Structure-aware: annotations/labels from the vocabulary, then random edits anywhere.
    const meta = pod.metadata as Record<string, Record<string, J>>;
    for (let k = Math.floor(r() * 4); k > 0; k--) {
      const where = r() < 0.6 ? 'annotations' : 'labels';
      meta[where] ??= {};
      meta[where]![g.pick(KEYS)] = g.pick(VALUES);
    }
    for (let k = Math.floor(r() * 4); k > 0; k--) {
      const target = r() < 0.8 ? pod : rev;
      const ps = g.paths(target).filter((p) => p.length > 0);
      const path = g.pick(ps);
      if (target === rev && path[0] === 'request' && path[1] === 'uid' && r() < 0.9) continue;
      g.setAt(target as Record<string, J>, path, r() < 0.3 ? undefined : g.scalar());
    }
    if (r() < 0.1) req.operation = g.pick(['CREATE', 'UPDATE', 'DELETE', 'CONNECT', 'create', '']);
    let payload = JSON.stringify(rev);
    if (r() < 0.05) {
      // Raw damage: truncation or a flipped byte.
      const at = Math.floor(r() * payload.length);
      payload =
        r() < 0.5
          ? payload.slice(0, at)
          : payload.slice(0, at) + String.fromCharCode(Math.floor(r() * 128)) + payload.slice(at + 1);
    }
    const app = g.pick(apps);
    const res = await app.inject({
      method: 'POST',
      url: '/mutate',
      payload,
      headers: { 'content-type': 'application/json' },
    });
    t.ok(res.statusCode < 500, `run ${i} (seed ${SEED}): HTTP ${res.statusCode} ${res.body.slice(0, 200)}`);
    if (res.statusCode !== 200) {
      bad++;
      t.equal(res.statusCode, 400, `run ${i}: ${res.statusCode}`);
      continue;
    }
    const d = decode(res.statusCode, res.body);
    t.ok(d.result?.code !== 500, `run ${i} (seed ${SEED}): planner crashed: ${d.result?.message}`);
    if (d.patch) {
      patched++;
      try {
        applyPatch((JSON.parse(payload) as { request: { object: J } }).request.object, d.patch);
      } catch (e) {
        t.fail(
          `run ${i} (seed ${SEED}): patch does not apply: ${(e as Error).message}\n${payload.slice(0, 2000)}`,
        );
      }
    } else if (d.allowed === false) denied++;
  }
  await Promise.all(apps.map((a) => a.close()));
  // The generator must exercise all three answers, or it proves little.
  t.ok(patched > RUNS / 20, `only ${patched} patched`);
  t.ok(denied > RUNS / 50, `only ${denied} denied`);
  t.ok(bad > RUNS / 100, `only ${bad} rejected`);
});
