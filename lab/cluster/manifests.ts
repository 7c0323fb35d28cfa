// Small builders for the objects the lab applies, so tests, benchmarks and the demo describe
// workloads the same way.

/** `node -e` arguments for a container that runs until SIGTERM (node as PID 1 has no default handler). */
export const IDLE_ARGS = [
  '-e',
  "process.on('SIGTERM', () => process.exit(0)); setInterval(() => {}, 1 << 30);",
];

/** An apps/v1 Deployment whose selector is its pod labels. */
export function deployment(
  name: string,
  namespace: string,
  labels: Record<string, string>,
  replicas: number,
  podSpec: Record<string, unknown>,
): object {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace },
    spec: { replicas, selector: { matchLabels: labels }, template: { metadata: { labels }, spec: podSpec } },
  };
}

/** An apps/v1 DaemonSet whose selector is its pod labels. */
export function daemonSet(
  name: string,
  namespace: string,
  labels: Record<string, string>,
  podSpec: Record<string, unknown>,
): object {
  return {
    apiVersion: 'apps/v1',
    kind: 'DaemonSet',
    metadata: { name, namespace },
    spec: { selector: { matchLabels: labels }, template: { metadata: { labels }, spec: podSpec } },
  };
}
