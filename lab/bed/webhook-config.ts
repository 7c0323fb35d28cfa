// The MutatingWebhookConfiguration the manifests ship, pointed at a webhook on loopback: what the
// end-to-end tests and the demo register with the API server.
export function webhookConfig(
  name: string,
  port: number,
  caBundle: string | undefined,
  failurePolicy = 'Fail',
) {
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingWebhookConfiguration',
    metadata: { name },
    webhooks: [
      {
        name: 'inject.drainguard.io',
        admissionReviewVersions: ['v1'],
        clientConfig: { url: `https://127.0.0.1:${port}/mutate`, ...(caBundle ? { caBundle } : {}) },
        rules: [
          {
            apiGroups: [''],
            apiVersions: ['v1'],
            operations: ['CREATE'],
            resources: ['pods'],
            scope: 'Namespaced',
          },
        ],
        sideEffects: 'None',
        failurePolicy,
        reinvocationPolicy: 'IfNeeded',
        timeoutSeconds: 5,
        matchPolicy: 'Equivalent',
        namespaceSelector: {
          matchExpressions: [
            { key: 'drainguard.io/inject', operator: 'In', values: ['enabled'] },
            { key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['kube-system'] },
          ],
        },
        objectSelector: {
          matchExpressions: [{ key: 'drainguard.io/inject', operator: 'NotIn', values: ['disabled'] }],
        },
      },
    ],
  };
}
