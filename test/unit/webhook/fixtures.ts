// Realistic pods for planner, golden, fuzz and benchmark inputs.

/** A MetalLB speaker DaemonSet pod as the Helm chart creates it (hostNetwork, memberlist ports, grace 0). */
export function speakerPod(): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      generateName: 'metallb-speaker-',
      namespace: 'metallb-system',
      labels: {
        'app.kubernetes.io/name': 'metallb',
        'app.kubernetes.io/component': 'speaker',
        'app.kubernetes.io/instance': 'metallb',
        'controller-revision-hash': '6f7c8d9b5',
        'pod-template-generation': '1',
      },
      ownerReferences: [
        {
          apiVersion: 'apps/v1',
          kind: 'DaemonSet',
          name: 'metallb-speaker',
          uid: '0f3c1c8e-6a2d-4c55-9d1e-3f2b4c5d6e7f',
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    spec: {
      hostNetwork: true,
      serviceAccountName: 'metallb-speaker',
      terminationGracePeriodSeconds: 0,
      nodeSelector: { 'kubernetes.io/os': 'linux' },
      affinity: {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [
              { matchFields: [{ key: 'metadata.name', operator: 'In', values: ['node-a'] }] },
            ],
          },
        },
      },
      tolerations: [
        { key: 'node-role.kubernetes.io/control-plane', operator: 'Exists', effect: 'NoSchedule' },
      ],
      containers: [
        {
          name: 'speaker',
          image: 'quay.io/metallb/speaker:v0.14.8',
          args: ['--port=7472', '--log-level=info'],
          env: [
            { name: 'METALLB_NODE_NAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
            { name: 'METALLB_HOST', valueFrom: { fieldRef: { fieldPath: 'status.hostIP' } } },
            { name: 'METALLB_ML_BIND_ADDR', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
            {
              name: 'METALLB_ML_LABELS',
              value: 'app.kubernetes.io/name=metallb,app.kubernetes.io/component=speaker',
            },
            { name: 'METALLB_ML_BIND_PORT', value: '7946' },
            { name: 'METALLB_ML_SECRET_KEY_PATH', value: '/etc/ml_secret_key' },
          ],
          ports: [
            { name: 'monitoring', containerPort: 7472, hostPort: 7472, protocol: 'TCP' },
            { name: 'memberlist-tcp', containerPort: 7946, hostPort: 7946, protocol: 'TCP' },
            { name: 'memberlist-udp', containerPort: 7946, hostPort: 7946, protocol: 'UDP' },
          ],
          livenessProbe: { httpGet: { path: '/metrics', port: 'monitoring' }, periodSeconds: 10 },
          readinessProbe: { httpGet: { path: '/metrics', port: 'monitoring' }, periodSeconds: 10 },
          securityContext: {
            allowPrivilegeEscalation: false,
            readOnlyRootFilesystem: true,
            capabilities: { drop: ['ALL'], add: ['NET_RAW'] },
          },
          volumeMounts: [{ name: 'memberlist', mountPath: '/etc/ml_secret_key' }],
        },
      ],
      volumes: [{ name: 'memberlist', secret: { secretName: 'metallb-memberlist', defaultMode: 420 } }],
    },
  };
}

/** A skupper v2 router pod: router + kube-adaptor, no preStop, default grace. */
export function skupperPod(): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      generateName: 'skupper-router-7c9f8d-',
      labels: {
        'skupper.io/component': 'router',
        application: 'skupper-router',
        'pod-template-hash': '7c9f8d',
      },
      annotations: { 'prometheus.io/scrape': 'true' },
    },
    spec: {
      serviceAccountName: 'skupper-router',
      containers: [
        {
          name: 'router',
          image: 'quay.io/skupper/skupper-router:3.2',
          ports: [
            { name: 'amqps', containerPort: 5671 },
            { name: 'healthz', containerPort: 9090 },
          ],
          readinessProbe: { httpGet: { path: '/healthz', port: 9090 } },
        },
        {
          name: 'kube-adaptor',
          image: 'quay.io/skupper/kube-adaptor:2.1',
          readinessProbe: { httpGet: { path: '/healthz', port: 9191 } },
        },
      ],
    },
  };
}

export function review(object: unknown, request: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: '705ab4f5-6393-11e8-b7cc-42010a800002',
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      requestKind: { group: '', version: 'v1', kind: 'Pod' },
      requestResource: { group: '', version: 'v1', resource: 'pods' },
      namespace: 'metallb-system',
      operation: 'CREATE',
      userInfo: { username: 'system:serviceaccount:kube-system:daemon-set-controller' },
      object,
      oldObject: null,
      dryRun: false,
      options: { apiVersion: 'meta.k8s.io/v1', kind: 'CreateOptions' },
      ...request,
    },
  };
}

/** A speaker pod with n extra env vars (the benchmark's and Istio #34799's huge pod). */
export function hugePod(n = 2000): Record<string, unknown> {
  const pod = speakerPod();
  const c = (pod.spec as { containers: { env: unknown[] }[] }).containers[0]!;
  for (let i = 0; i < n; i++) c.env.push({ name: `VAR_${i}`, value: `value-${i}-${'x'.repeat(20)}` });
  return pod;
}
