import { X509Certificate } from 'node:crypto';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { certNotAfter, createCA, createServingCert } from '../../../shared/pki.ts';

t.test('CA signs a serving cert that Node verifies for its DNS and IP SANs', async (t) => {
  const ca = createCA('drainguard-test-ca', 10);
  const serving = createServingCert(ca, {
    dnsNames: ['drainguard.drainguard-system.svc', 'localhost'],
    ipAddresses: ['127.0.0.1', '::1'],
    days: 2,
  });
  const x = new X509Certificate(serving.certPem);
  t.ok(x.checkIssued(new X509Certificate(ca.certPem)));
  t.match(x.subjectAltName ?? '', /DNS:drainguard\.drainguard-system\.svc/);
  t.match(x.subjectAltName ?? '', /IP Address:127\.0\.0\.1/);
  t.ok(new X509Certificate(ca.certPem).ca);
  t.ok(certNotAfter(serving.certPem) - Date.now() > 1.9 * 86_400_000);

  const server = https.createServer({ cert: serving.certPem, key: serving.keyPem }, (_req, res) =>
    res.end('ok'),
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  try {
    for (const host of ['127.0.0.1', 'localhost']) {
      const body = await new Promise<string>((resolve, reject) => {
        https
          .get(
            {
              host: '127.0.0.1',
              port,
              ca: ca.certPem,
              path: '/',
              ...(host === 'localhost' ? { servername: host } : {}),
            },
            (res) => {
              let data = '';
              res.on('data', (c) => (data += c));
              res.on('end', () => resolve(data));
            },
          )
          .on('error', reject);
      });
      t.equal(body, 'ok');
    }
    // A different CA must not be trusted.
    const other = createCA('other', 1);
    await t.rejects(
      new Promise((resolve, reject) =>
        https.get({ host: '127.0.0.1', port, ca: other.certPem }, resolve).on('error', reject),
      ),
    );
  } finally {
    server.close();
  }
});

t.test('createServingCert names the bad field', async (t) => {
  const ca = createCA('x', 1);
  t.throws(() => createServingCert(ca, { days: 1 }), /dnsNames, ipAddresses/);
  t.throws(() => createServingCert(ca, { ipAddresses: ['nope'], days: 1 }), /ipAddresses: nope/);
  t.throws(() => createCA('x', 0), /days/);
});
