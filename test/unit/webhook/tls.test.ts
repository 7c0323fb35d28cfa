// cert-manager mode: the mounted pair is swapped the way the kubelet does it (a ..data symlink
// flip) while clients keep opening new TLS connections; none may fail, and the new cert is served.
import { X509Certificate } from 'node:crypto';
import https from 'node:https';
import type { TLSSocket } from 'node:tls';
import t from 'tap';
import { certDirFlags, mountLikeKubelet as mount, silent } from '../../../lab/fake/webhook.ts';
import { waitFor } from '../../../shared/clock.ts';
import { type CertPair, certNotAfter, createCA, createServingCert } from '../../../shared/pki.ts';
import { parseConfig, startWebhook } from '../../../webhook/main.ts';
import { review, speakerPod } from './fixtures.ts';

function call(port: number, ca: string, agent: https.Agent | false, path = '/healthz', body?: string) {
  return new Promise<{ status: number; fingerprint: string; body: string }>((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: body ? 'POST' : 'GET',
        ca,
        agent,
        servername: 'drainguard-webhook.drainguard-system.svc',
        headers: body ? { 'content-type': 'application/json' } : {},
      },
      (res) => {
        const fp = (res.socket as TLSSocket).getPeerCertificate().fingerprint256;
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, fingerprint: fp, body: text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

t.test(
  'cert-dir mode reloads the pair under load without a failed handshake; a broken pair is skipped',
  async (t) => {
    const dir = t.testdir();
    const ca1 = createCA('ca-1', 10);
    const ca2 = createCA('ca-2', 10);
    const names = { dnsNames: ['drainguard-webhook.drainguard-system.svc'], days: 5 };
    const pairs = [
      createServingCert(ca1, names),
      createServingCert(ca2, names),
      createServingCert(ca1, names),
    ];
    const fp = (p: CertPair) => new X509Certificate(p.certPem).fingerprint256;
    mount(dir, pairs[0]!);
    const cfg = parseConfig(
      certDirFlags(dir, '--sidecar-image', 'img:1', '--sidecar-mode', 'native', '--cert-poll-seconds', '1'),
      {},
    );
    const hook = await startWebhook(cfg, process.env.DEBUG_TLS ? undefined : silent());
    const trust = ca1.certPem + ca2.certPem;
    try {
      // TLS 1.1 is refused.
      await t.rejects(
        new Promise((resolve, reject) =>
          https
            .get(
              {
                host: '127.0.0.1',
                port: hook.port,
                ca: trust,
                maxVersion: 'TLSv1.1',
                minVersion: 'TLSv1',
                servername: names.dnsNames[0],
              },
              resolve,
            )
            .on('error', reject),
        ),
      );
      t.equal((await call(hook.port, trust, false)).fingerprint, fp(pairs[0]!));

      let stop = false;
      let ok = 0;
      const failures: string[] = [];
      const keepAlive = new https.Agent({ keepAlive: true, maxSockets: 4 });
      const body = JSON.stringify(review(speakerPod()));
      const load = Array.from({ length: 6 }, async (_, i) => {
        while (!stop) {
          try {
            const r = await call(
              hook.port,
              trust,
              i % 2 === 0 ? false : keepAlive,
              i % 3 === 0 ? '/mutate' : '/healthz',
              i % 3 === 0 ? body : undefined,
            );
            if (r.status !== 200) failures.push(`HTTP ${r.status}`);
            else ok++;
          } catch (e) {
            failures.push((e as Error).message);
          }
        }
      });
      try {
        for (const next of [pairs[1]!, pairs[2]!]) {
          mount(dir, next);
          await waitFor(
            'new certificate served',
            async () => (await call(hook.port, trust, false)).fingerprint === fp(next),
            {
              timeoutMs: 15_000,
              intervalMs: 100,
            },
          );
        }
        // A key that does not match its cert (a half-done rotation) must not replace the working pair.
        mount(dir, { certPem: pairs[1]!.certPem, keyPem: pairs[0]!.keyPem });
        const rejected = hook.metrics.counter('drainguard_webhook_cert_reloads_total', '');
        await waitFor('broken pair rejected', () => rejected.get({ result: 'rejected' }) >= 1, {
          timeoutMs: 15_000,
        });
        const before = ok;
        await waitFor('load continues after a broken mount', () => ok > before + 20, { timeoutMs: 15_000 });
      } finally {
        stop = true;
        await Promise.all(load);
      }
      keepAlive.destroy();
      t.strictSame(failures, []);
      t.ok(ok > 40, `only ${ok} requests made it`);
      t.equal((await call(hook.port, trust, false)).fingerprint, fp(pairs[2]!));
      // The served certificate's expiry, for the alert (cert-manager renews, the webhook serves).
      t.match(
        hook.metrics.render(),
        new RegExp(
          `^drainguard_webhook_certificate_expiration_timestamp_seconds\\{source="cert-dir"\\} ${certNotAfter(pairs[2]!.certPem) / 1000}$`,
          'm',
        ),
      );
    } finally {
      await hook.close();
    }
  },
);

t.test('config errors name the flag and the accepted values', async (t) => {
  t.throws(() => parseConfig(['--tls-cert-dir', '/x'], {}), /--sidecar-image .*unless --pod-name/);
  // The Deployment's way: the image comes from its own pod, named by the downward API.
  const own = parseConfig(['--tls-cert-dir', '/x'], {
    DRAINGUARD_WEBHOOK_POD_NAME: 'drainguard-webhook-abc',
  });
  t.equal(own.podName, 'drainguard-webhook-abc');
  t.equal(own.sidecarImage, '');
  t.throws(
    () => parseConfig(['--sidecar-image', 'i'], {}),
    /exactly one of --tls-cert-dir DIR and --tls-self-managed/,
  );
  t.throws(
    () => parseConfig(['--sidecar-image', 'i', '--tls-self-managed', '--sidecar-mode', 'x'], {}),
    /--sidecar-mode="x": accepted values are auto, native, classic/,
  );
  t.throws(
    () => parseConfig(['--sidecar-image', 'i', '--tls-self-managed', '--port', 'http'], {}),
    /--port="http": accepted is a whole number from 0 to 65535$/,
  );
  t.throws(
    () => parseConfig(['--sidecar-image', 'i', '--tls-self-managed', '--drain-seconds', '301'], {}),
    /--drain-seconds="301": accepted is a whole number from 0 to 300$/,
  );
  t.throws(
    () => parseConfig(['--sidecar-image', 'i'], { DRAINGUARD_WEBHOOK_TLS_SELF_MANAGED: 'yes' }),
    /^DRAINGUARD_WEBHOOK_TLS_SELF_MANAGED="yes": accepted values are true, false$/,
  );
  const cfg = parseConfig([], {
    DRAINGUARD_SIDECAR_IMAGE: 'img',
    DRAINGUARD_WEBHOOK_TLS_SELF_MANAGED: 'true',
  });
  t.equal(cfg.sidecarImage, 'img');
  t.equal(cfg.tlsSelfManaged, true);
  t.equal(cfg.port, 8443);
});

t.test(
  'kubeconfig: --kubeconfig names one file; $KUBECONFIG (maybe a list) is left to the loader',
  async (t) => {
    const base = { DRAINGUARD_SIDECAR_IMAGE: 'img', DRAINGUARD_WEBHOOK_TLS_SELF_MANAGED: 'true' };
    const fromEnv = parseConfig([], {
      ...base,
      KUBECONFIG: '/a:/b',
      DRAINGUARD_WEBHOOK_KUBE_CONTEXT: 'prod',
    });
    t.equal(fromEnv.kubeconfig, undefined);
    t.equal(fromEnv.context, 'prod');
    const fromFlags = parseConfig(['--kubeconfig', '/k', '--context', 'dev'], {
      ...base,
      KUBECONFIG: '/a:/b',
    });
    t.equal(fromFlags.kubeconfig, '/k');
    t.equal(fromFlags.context, 'dev');
  },
);
