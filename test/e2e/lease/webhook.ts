// A validating admission webhook on Leases for tests: lets a test act *inside* a Lease
// write (make a concurrent write land between read and write, or hold the request so it
// keeps its API priority-and-fairness seat). Served over TLS on loopback with its own CA.
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { KubeClient } from '../../../shared/kube/client.ts';
import type { Lease } from '../../../shared/kube/types.ts';
import { createCA, createServingCert } from '../../../shared/pki.ts';

export interface LeaseReview {
  uid: string;
  operation: string;
  userInfo: { username: string };
  object?: Lease;
  oldObject?: Lease;
}

export interface LeaseWebhook {
  url: string;
  caBundle: string;
  configName: string;
  close(): Promise<void>;
}

/**
 * Serves the webhook and registers a ValidatingWebhookConfiguration for Lease UPDATEs in
 * namespaces labelled drainguard-test/ns=<namespace>. `decide` may take its time (up to timeoutSeconds).
 */
export async function startLeaseWebhook(
  client: KubeClient,
  namespace: string,
  decide: (r: LeaseReview) => Promise<{ allowed: boolean; message?: string; code?: number }>,
  timeoutSeconds = 30,
): Promise<LeaseWebhook> {
  const ca = createCA('drainguard-lease-webhook-ca', 1);
  const serving = createServingCert(ca, { ipAddresses: ['127.0.0.1'], days: 1 });
  const server = https.createServer({ cert: serving.certPem, key: serving.keyPem }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const review = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { request: LeaseReview };
      let verdict: { allowed: boolean; message?: string; code?: number };
      try {
        verdict = await decide(review.request);
      } catch (e) {
        verdict = { allowed: true, message: (e as Error).message };
      }
      const body = JSON.stringify({
        apiVersion: 'admission.k8s.io/v1',
        kind: 'AdmissionReview',
        response: {
          uid: review.request.uid,
          allowed: verdict.allowed,
          ...(verdict.message || verdict.code
            ? { status: { message: verdict.message ?? '', ...(verdict.code ? { code: verdict.code } : {}) } }
            : {}),
        },
      });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}/validate`;
  const caBundle = Buffer.from(ca.certPem).toString('base64');
  const configName = `lease-test-${namespace}`;
  await client.create('/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations', {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingWebhookConfiguration',
    metadata: { name: configName },
    webhooks: [
      {
        name: 'leases.test.drainguard.io',
        clientConfig: { url, caBundle },
        rules: [
          {
            apiGroups: ['coordination.k8s.io'],
            apiVersions: ['v1'],
            operations: ['UPDATE'],
            resources: ['leases'],
          },
        ],
        namespaceSelector: { matchLabels: { 'drainguard-test/ns': namespace } },
        failurePolicy: 'Ignore',
        sideEffects: 'None',
        admissionReviewVersions: ['v1'],
        timeoutSeconds,
      },
    ],
  });
  return {
    url,
    caBundle,
    configName,
    async close() {
      await client
        .delete(`/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/${configName}`)
        .catch(() => {});
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
