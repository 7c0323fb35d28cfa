// The webhook against a real kube-apiserver 1.20: the API server calls it over TLS with the
// caBundle, applies namespace/object selectors, honours failurePolicy, and stores the patched pod.
import { X509Certificate } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import https from 'node:https';
import { join } from 'node:path';
import Fastify from 'fastify';
import t, { type Test } from 'tap';
import { type ControlPlane, freePort, startControlPlane } from '../../../lab/bed/control-plane.ts';
import { webhookConfig } from '../../../lab/bed/webhook-config.ts';
import { certDirFlags, mountLikeKubelet } from '../../../lab/fake/webhook.ts';
import { waitFor } from '../../../shared/clock.ts';
import type { KubeClient } from '../../../shared/kube/client.ts';
import type { KubeObject, Pod } from '../../../shared/kube/types.ts';
import { createLogger } from '../../../shared/log.ts';
import { createCA, createServingCert } from '../../../shared/pki.ts';
import { parseConfig, type RunningWebhook, startWebhook } from '../../../webhook/main.ts';
import { skupperPod, speakerPod } from '../../unit/webhook/fixtures.ts';

const silent = createLogger('test', 'silent');
let cp: ControlPlane;
let client: KubeClient;
const MWC = '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations';

t.before(async () => {
  cp = await startControlPlane();
  client = cp.client();
  for (const [name, version] of [
    ['node-old', 'v1.28.7'],
    ['node-new', 'v1.30.2'],
  ] as const)
    await client.create('/api/v1/nodes', {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name },
      status: { nodeInfo: { kubeletVersion: version } },
    });
});
t.teardown(async () => {
  if (process.env.DEBUG_APISERVER)
    (await import('node:fs')).copyFileSync(`${cp.dir}/apiserver.log`, '/tmp/dg-apiserver.log');
  client?.close();
  await cp?.stop();
  // Once, in a clean-clone CI run, this file passed every test and then did not exit until its
  // 900 s timeout. An unref'd timer fires only if something else still holds the process: say what.
  setTimeout(() => {
    process.stderr.write(
      `webhook.test.ts: 30 s after teardown, still held by ${JSON.stringify(process.getActiveResourcesInfo())}\n`,
    );
  }, 30_000).unref();
});

const createNamespace = (name: string, labels: Record<string, string> = {}) =>
  client.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels } });

let nsCounter = 0;
async function namespace(labelled: boolean): Promise<string> {
  const name = `wh-${process.pid}-${nsCounter++}`;
  await createNamespace(name, labelled ? { 'drainguard.io/inject': 'enabled' } : {});
  return name;
}

type WithCaBundle = KubeObject & { webhooks: { clientConfig: { caBundle?: string } }[] };
/** A MutatingWebhookConfiguration as the API server has it. */
const webhookConfiguration = (name: string) => client.get<WithCaBundle>(`${MWC}/${name}`);
/** The self-managed TLS Secret of namespace `ns`. */
const tlsSecret = (ns: string) =>
  client.get<KubeObject & { data: Record<string, string> }>(
    `/api/v1/namespaces/${ns}/secrets/drainguard-webhook-tls`,
  );

/** The flags of a self-managed webhook of namespace `ns`, for its configuration `configName`. */
const selfManagedArgs = (ns: string, configName: string, ...more: string[]) => [
  ...['--host', '127.0.0.1', '--tls-self-managed', '--sidecar-mode', 'classic'],
  ...['--kubeconfig', cp.kubeconfigPath, '--namespace', ns, '--webhook-config-name', configName],
  ...more,
];

/** A speaker pod pinned to a node the way the DaemonSet controller pins it. */
function speakerOn(node: string): Record<string, unknown> {
  const pod = speakerPod() as { metadata: Record<string, unknown>; spec: Record<string, unknown> };
  delete pod.metadata.ownerReferences;
  delete pod.metadata.namespace;
  (
    pod.spec.affinity as {
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: { matchFields: { values: string[] }[] }[];
        };
      };
    }
  ).nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]!.matchFields[0]!.values =
    [node];
  pod.spec.volumes = [];
  (pod.spec.containers as { volumeMounts?: unknown }[])[0]!.volumeMounts = undefined;
  return pod;
}

const createPod = (ns: string, pod: Record<string, unknown>, query: Record<string, string> = {}) =>
  client.create<Pod>(`/api/v1/namespaces/${ns}/pods`, pod, { query });

const names = (p: Pod, field: 'containers' | 'initContainers') =>
  ((p.spec?.[field] as { name: string }[] | undefined) ?? []).map((c) => c.name);

async function certDirWebhook(
  t: Test,
  mode: 'auto' | 'classic' = 'auto',
  imageArgs: string[] = ['--sidecar-image', 'drainguard:e2e'],
): Promise<{ hook: RunningWebhook; caBundle: string; dir: string }> {
  const dir = t.testdir();
  const ca = createCA('e2e-webhook-ca', 2);
  const serving = createServingCert(ca, { ipAddresses: ['127.0.0.1'], days: 1 });
  writeFileSync(join(dir, 'tls.crt'), serving.certPem);
  writeFileSync(join(dir, 'tls.key'), serving.keyPem);
  const cfg = parseConfig(
    certDirFlags(dir, ...imageArgs, '--sidecar-mode', mode, '--kubeconfig', cp.kubeconfigPath),
    {},
  );
  const hook = await startWebhook(cfg, silent);
  if (mode === 'auto')
    await waitFor('node versions', () => hook.kubeletVersions()?.size === 2, { timeoutMs: 15_000 });
  return { hook, caBundle: Buffer.from(ca.certPem).toString('base64'), dir };
}

t.test(
  'the API server calls the webhook: labelled namespace injected, unlabelled and opted-out untouched, failurePolicy honoured',
  async (t) => {
    const { hook, caBundle } = await certDirWebhook(t);
    await client.create(MWC, webhookConfig('drainguard-e2e', hook.port, caBundle));
    try {
      const on = await namespace(true);
      const off = await namespace(false);

      // The target node's kubelet is 1.28: classic sidecar, appended to containers.
      const old = await createPod(on, speakerOn('node-old'));
      t.strictSame(names(old, 'containers'), ['speaker', 'drainguard']);
      t.equal(old.spec?.terminationGracePeriodSeconds, 35);
      const lifecycle = (
        (old.spec?.containers ?? []) as {
          lifecycle?: { preStop?: { httpGet?: { host?: string; path?: string } } };
        }[]
      )[0]?.lifecycle;
      t.equal(lifecycle?.preStop?.httpGet?.path, '/prestop');
      t.equal(lifecycle?.preStop?.httpGet?.host, '127.0.0.1');
      t.match(old.metadata?.annotations?.['drainguard.io/status'] ?? '', /"mode":"classic"/);

      // A 1.30 kubelet and an API server that has native sidecars: a restartable init container,
      // which this server accepts with its probes and ports.
      const fresh = await createPod(on, speakerOn('node-new'));
      t.strictSame(names(fresh, 'containers'), ['speaker']);
      t.strictSame(names(fresh, 'initContainers'), ['drainguard']);
      t.match(fresh.metadata?.annotations?.['drainguard.io/status'] ?? '', /"mode":"native"/);

      // Server-side dry run goes through the webhook too (sideEffects: None).
      const dry = await createPod(on, skupperPod(), { dryRun: 'All' });
      t.ok(
        names(dry, 'containers').includes('drainguard') ||
          names(dry, 'initContainers').includes('drainguard'),
      );

      const untouched = await createPod(off, speakerOn('node-old'));
      t.strictSame(names(untouched, 'containers'), ['speaker']);
      t.equal(untouched.metadata?.annotations?.['drainguard.io/status'], undefined);

      const optedOut = speakerOn('node-old') as { metadata: { labels: Record<string, string> } };
      optedOut.metadata.labels['drainguard.io/inject'] = 'disabled';
      const out = await createPod(on, optedOut);
      t.strictSame(names(out, 'containers'), ['speaker']);

      // A bad annotation is a denial that names the key.
      const bad = speakerOn('node-old') as { metadata: { annotations?: Record<string, string> } };
      bad.metadata.annotations = { 'drainguard.io/sidecar-mode': 'sometimes' };
      await t.rejects(
        createPod(on, bad),
        /drainguard\.io\/sidecar-mode="sometimes": accepted values are auto, native, classic/,
      );

      const metrics = hook.metrics.render();
      t.match(metrics, /drainguard_webhook_requests_total\{outcome="patched",profile="metallb-speaker"\} 2/);

      // Webhook gone + failurePolicy Fail: pod creation in opted-in namespaces is refused...
      await hook.close();
      await t.rejects(createPod(on, speakerOn('node-old')), /failed calling webhook/);
      // ...and with Ignore the pod starts without the sidecar (why Fail is the default).
      const cfg = await client.get<KubeObject & { webhooks: { failurePolicy: string }[] }>(
        `${MWC}/drainguard-e2e`,
      );
      cfg.webhooks[0]!.failurePolicy = 'Ignore';
      await client.replace(`${MWC}/drainguard-e2e`, cfg);
      const ignored = await waitFor(
        'Ignore applied',
        async () => {
          try {
            return await createPod(on, speakerOn('node-old'));
          } catch {
            return undefined;
          }
        },
        { timeoutMs: 15_000, intervalMs: 200 },
      );
      t.strictSame(names(ignored, 'containers'), ['speaker']);
    } finally {
      await hook.close().catch(() => undefined);
      await client.delete(`${MWC}/drainguard-e2e`);
    }
  },
);

t.test(
  'without --sidecar-image the webhook injects its own image, read from its pod; an unreadable pod stops it with a clear error',
  async (t) => {
    const own = 'drainguard-own';
    await createNamespace(own);
    await client.create(`/api/v1/namespaces/${own}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'drainguard-webhook-7d9f-x2k4' },
      spec: { containers: [{ name: 'webhook', image: 'registry.example/drainguard:1.2.3' }] },
    });
    const { hook, caBundle } = await certDirWebhook(t, 'classic', [
      '--pod-name',
      'drainguard-webhook-7d9f-x2k4',
      '--namespace',
      own,
    ]);
    await client.create(MWC, webhookConfig('drainguard-own-image', hook.port, caBundle));
    try {
      const on = await namespace(true);
      const pod = await createPod(on, speakerOn('node-old'));
      const sidecar = ((pod.spec?.containers ?? []) as { name: string; image?: string }[]).find(
        (c) => c.name === 'drainguard',
      );
      t.equal(sidecar?.image, 'registry.example/drainguard:1.2.3');
      await t.rejects(
        certDirWebhook(t, 'classic', ['--pod-name', 'no-such-pod', '--namespace', own]),
        /cannot read the own pod drainguard-own\/no-such-pod .*set --sidecar-image/,
      );
    } finally {
      await hook.close();
      await client.delete(`${MWC}/drainguard-own-image`);
    }
  },
);

t.test(
  'cert-manager renewal from a CA Issuer under steady admissions: none fails; a pair from another CA (a renewed self-signed leaf) fails them',
  async (t) => {
    const dir = t.testdir();
    const ca = createCA('drainguard-webhook-ca', 10);
    const pairOf = (issuer: typeof ca) => createServingCert(issuer, { ipAddresses: ['127.0.0.1'], days: 1 });
    mountLikeKubelet(dir, pairOf(ca));
    const hook = await startWebhook(
      parseConfig(
        [
          ...certDirFlags(dir, '--cert-poll-seconds', '1'),
          ...['--sidecar-image', 'drainguard:e2e', '--sidecar-mode', 'classic'],
        ],
        {},
      ),
      silent,
    );
    // cainjector's caBundle: the CA (what the cert-manager overlay injects), not the serving leaf.
    await client.create(
      MWC,
      webhookConfig('drainguard-renewal', hook.port, Buffer.from(ca.certPem).toString('base64')),
    );
    try {
      const on = await namespace(true);
      let stop = false;
      let ok = 0;
      const failed: string[] = [];
      const load = (async () => {
        while (!stop)
          await createPod(on, speakerOn('node-old')).then(
            () => ok++,
            (e: unknown) => failed.push((e as Error).message),
          );
      })();
      try {
        await waitFor('admissions flowing', () => ok >= 5, { timeoutMs: 20_000 });
        // Renewal: a new key and certificate from the same CA, swapped in as the kubelet does.
        const renewed = pairOf(ca);
        mountLikeKubelet(dir, renewed);
        await waitFor('renewed pair served', () => hook.serving().cert === renewed.certPem, {
          timeoutMs: 20_000,
        });
        const at = ok;
        await waitFor('admissions after the renewal', () => ok >= at + 10, { timeoutMs: 20_000 });
      } finally {
        stop = true;
        await load;
      }
      t.strictSame(failed, [], 'no admission failed across the renewal');
      // The old overlay's failure: a self-signed serving certificate is its own CA, so its renewal
      // is a pair the caBundle does not hold yet.
      const foreign = pairOf(createCA('drainguard-webhook-selfsigned', 10));
      mountLikeKubelet(dir, foreign);
      await waitFor('foreign pair served', () => hook.serving().cert === foreign.certPem, {
        timeoutMs: 20_000,
      });
      // Open connections keep their session; every new one (as the API server opens them, trusting
      // only the caBundle) fails the handshake.
      const handshake = () =>
        new Promise<void>((resolve, reject) => {
          const req = https.get(
            { host: '127.0.0.1', port: hook.port, path: '/healthz', ca: ca.certPem, agent: false },
            (res) => {
              res.resume();
              res.on('end', () => resolve());
            },
          );
          req.on('error', reject);
        });
      await t.rejects(handshake(), /certificate/);
    } finally {
      await hook.close();
      await client.delete(`${MWC}/drainguard-renewal`);
    }
  },
);

t.test('reinvocation (IfNeeded) after another webhook changed the pod injects nothing twice', async (t) => {
  const { hook, caBundle } = await certDirWebhook(t, 'classic');
  // A second webhook, called after ours (configurations run in name order), adds a label:
  // the API server then calls ours again because reinvocationPolicy is IfNeeded.
  const ca = createCA('labeller-ca', 1);
  const tls = createServingCert(ca, { ipAddresses: ['127.0.0.1'], days: 1 });
  let labellerCalls = 0;
  const labeller = Fastify({ https: { cert: tls.certPem, key: tls.keyPem } });
  labeller.post('/mutate', async (req) => {
    labellerCalls++;
    const uid = (req.body as { request: { uid: string } }).request.uid;
    const patch = [{ op: 'add', path: '/metadata/labels/labelled-by-second-webhook', value: 'yes' }];
    return {
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      response: {
        uid,
        allowed: true,
        patchType: 'JSONPatch',
        patch: Buffer.from(JSON.stringify(patch)).toString('base64'),
      },
    };
  });
  await labeller.listen({ port: 0, host: '127.0.0.1' });
  const lport = (labeller.server.address() as { port: number }).port;
  await client.create(MWC, webhookConfig('a-drainguard', hook.port, caBundle));
  await client.create(MWC, webhookConfig('b-labeller', lport, Buffer.from(ca.certPem).toString('base64')));
  try {
    const on = await namespace(true);
    const pod = await createPod(on, speakerOn('node-old'));
    t.equal(pod.metadata?.labels?.['labelled-by-second-webhook'], 'yes');
    t.strictSame(names(pod, 'containers'), ['speaker', 'drainguard']);
    t.equal(labellerCalls, 1);
    const text = hook.metrics.render();
    // Called twice for the one pod: once patched, once (reinvoked) allowed as already injected.
    t.match(text, /drainguard_webhook_requests_total\{outcome="patched",profile="metallb-speaker"\} 1/);
    t.match(text, /drainguard_webhook_requests_total\{outcome="allowed",profile="already-injected"\} 1/);
  } finally {
    await client.delete(`${MWC}/a-drainguard`);
    await client.delete(`${MWC}/b-labeller`);
    await labeller.close();
    await hook.close();
  }
});

t.test(
  'self-managed TLS: Secret created once and shared, caBundle patched, API server then calls it',
  async (t) => {
    const ns = 'drainguard-system';
    await createNamespace(ns);
    const port = await freePort();
    // The overlay ships the Secret empty (the webhook has no create on Secrets): it fills it in.
    await client.create(`/api/v1/namespaces/${ns}/secrets`, {
      apiVersion: 'v1',
      kind: 'Secret',
      type: 'Opaque',
      metadata: { name: 'drainguard-webhook-tls', namespace: ns },
    });
    // The configuration starts without a caBundle: the webhook fills it in.
    await client.create(MWC, webhookConfig('drainguard-self', port, undefined));
    const args = (p: number) =>
      selfManagedArgs(
        ns,
        'drainguard-self',
        '--port',
        String(p),
        '--sidecar-image',
        'drainguard:e2e',
        '--tls-ip-san',
        '127.0.0.1',
      );
    // Two replicas racing on the Secret converge on one CA.
    const [a, b] = await Promise.all([
      startWebhook(parseConfig(args(port), {}), silent),
      startWebhook(parseConfig(args(0), {}), silent),
    ]);
    try {
      const secret = await tlsSecret(ns);
      const tlsCrt = Buffer.from(secret.data['tls.crt']!, 'base64').toString();
      t.equal(a.serving().cert, tlsCrt);
      t.equal(b.serving().cert, tlsCrt);
      const cfg = await webhookConfiguration('drainguard-self');
      t.equal(cfg.webhooks[0]!.clientConfig.caBundle, secret.data['ca-bundle.crt']);

      const on = await namespace(true);
      const pod = await createPod(on, speakerOn('node-old'));
      t.strictSame(names(pod, 'containers'), ['speaker', 'drainguard']);

      // A restart reuses the stored material: no new CA, no caBundle churn.
      await b.close();
      const c = await startWebhook(parseConfig(args(0), {}), silent);
      t.equal(c.serving().cert, tlsCrt);
      await c.close();
      const after = await client.get<KubeObject>(`${MWC}/drainguard-self`);
      t.equal(after.metadata?.resourceVersion, cfg.metadata?.resourceVersion);
    } finally {
      await a.close();
      await b.close().catch(() => undefined);
      await client.delete(`${MWC}/drainguard-self`);
    }
  },
);

t.test(
  'self-managed TLS rotates a serving cert near expiry and a CA near expiry, keeping the old CA in the bundle',
  async (t) => {
    const ns = 'drainguard-rotate';
    await createNamespace(ns);
    await client.create(MWC, webhookConfig('drainguard-rotate', 1, undefined));
    const day = 86_400_000;
    const secretPath = `/api/v1/namespaces/${ns}/secrets/drainguard-webhook-tls`;
    const b64 = (s: string) => Buffer.from(s).toString('base64');
    const write = async (
      ca: { certPem: string; keyPem: string },
      serving: { certPem: string; keyPem: string },
    ) => {
      const data = {
        'ca.crt': b64(ca.certPem),
        'ca.key': b64(ca.keyPem),
        'ca-bundle.crt': b64(ca.certPem),
        'tls.crt': b64(serving.certPem),
        'tls.key': b64(serving.keyPem),
      };
      try {
        const cur = await client.get<KubeObject>(secretPath);
        await client.replace(secretPath, { ...cur, data });
      } catch {
        await client.create(`/api/v1/namespaces/${ns}/secrets`, {
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: { name: 'drainguard-webhook-tls', namespace: ns },
          data,
        });
      }
    };
    const args = selfManagedArgs(
      ns,
      'drainguard-rotate',
      ...['--port', '0', '--sidecar-image', 'i', '--tls-ip-san', '127.0.0.1'],
      ...['--serving-days', '30', '--ca-days', '3650'],
    );
    try {
      // Serving cert with 5 of 30 days left (< a third): renewed, same CA.
      const ca = createCA('drainguard-webhook-ca', 3650);
      const names = {
        dnsNames: ['drainguard-webhook.drainguard-rotate.svc'],
        ipAddresses: ['127.0.0.1'],
        days: 30,
      };
      await write(ca, createServingCert(ca, names, Date.now() - 25 * day));
      let hook = await startWebhook(parseConfig(args, {}), silent);
      const renewed = new X509Certificate(hook.serving().cert);
      t.ok(renewed.checkIssued(new X509Certificate(ca.certPem)));
      t.ok(Date.parse(renewed.validTo) - Date.now() > 29 * day);
      await hook.close();

      // CA with 10 of 3650 days left: a new CA; the bundle holds new and old.
      const oldCa = createCA('drainguard-webhook-ca', 3650, Date.now() - 3640 * day);
      await write(oldCa, createServingCert(oldCa, names));
      hook = await startWebhook(parseConfig(args, {}), silent);
      const secret = await tlsSecret(ns);
      const bundle = Buffer.from(secret.data['ca-bundle.crt']!, 'base64').toString();
      const certs = bundle.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
      t.equal(certs.length, 2);
      t.equal(certs[1]!.trim(), oldCa.certPem.trim());
      const newCa = new X509Certificate(certs[0]!);
      t.ok(new X509Certificate(hook.serving().cert).checkIssued(newCa));
      const cfg = await webhookConfiguration('drainguard-rotate');
      t.equal(cfg.webhooks[0]!.clientConfig.caBundle, secret.data['ca-bundle.crt']);
      await hook.close();
    } finally {
      await client.delete(`${MWC}/drainguard-rotate`);
    }
  },
);

t.test(
  'self-managed TLS: a configuration created after the webhook started gets its caBundle',
  async (_t) => {
    const ns = 'drainguard-late';
    await createNamespace(ns);
    const args = selfManagedArgs(ns, 'drainguard-late', '--port', '0', '--sidecar-image', 'i');
    const hook = await startWebhook(parseConfig(args, {}), silent);
    try {
      await client.create(MWC, webhookConfig('drainguard-late', hook.port, undefined));
      const secret = await tlsSecret(ns);
      await waitFor(
        'caBundle set',
        async () =>
          (await webhookConfiguration('drainguard-late')).webhooks[0]?.clientConfig.caBundle ===
          secret.data['ca-bundle.crt'],
        { timeoutMs: 20_000, intervalMs: 200 },
      );
    } finally {
      await hook.close();
      await client.delete(`${MWC}/drainguard-late`);
    }
  },
);
