import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { certNotAfter, createCA, createServingCert } from '../../../shared/pki.ts';

test('CA signs a serving cert that Node verifies for its DNS and IP SANs', async () => {
  const ca = createCA('drainguard-test-ca', 10);
  const serving = createServingCert(ca, {
    dnsNames: ['drainguard.drainguard-system.svc', 'localhost'],
    ipAddresses: ['127.0.0.1', '::1'],
    days: 2,
  });
  const x = new X509Certificate(serving.certPem);
  assert.ok(x.checkIssued(new X509Certificate(ca.certPem)));
  assert.match(x.subjectAltName ?? '', /DNS:drainguard\.drainguard-system\.svc/);
  assert.match(x.subjectAltName ?? '', /IP Address:127\.0\.0\.1/);
  assert.ok(new X509Certificate(ca.certPem).ca);
  assert.ok(certNotAfter(serving.certPem) - Date.now() > 1.9 * 86_400_000);

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
              let t = '';
              res.on('data', (c) => (t += c));
              res.on('end', () => resolve(t));
            },
          )
          .on('error', reject);
      });
      assert.equal(body, 'ok');
    }
    // A different CA must not be trusted.
    const other = createCA('other', 1);
    await assert.rejects(
      new Promise((resolve, reject) =>
        https.get({ host: '127.0.0.1', port, ca: other.certPem }, resolve).on('error', reject),
      ),
    );
  } finally {
    server.close();
  }
});

test('createServingCert names the bad field', () => {
  const ca = createCA('x', 1);
  assert.throws(() => createServingCert(ca, { days: 1 }), /dnsNames, ipAddresses/);
  assert.throws(() => createServingCert(ca, { ipAddresses: ['nope'], days: 1 }), /ipAddresses: nope/);
  assert.throws(() => createCA('x', 0), /days/);
});
