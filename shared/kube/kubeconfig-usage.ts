// The --kubeconfig/--context help lines every command shows; apart from kubeconfig.ts so that
// printing usage does not load @kubernetes/client-node.
export function kubeconfigUsage(width: number): string {
  return [
    `  ${'--kubeconfig PATH'.padEnd(width)} API access (default: $KUBECONFIG, several files merged as kubectl`,
    `  ${''.padEnd(width)} does; else ~/.kube/config; else the pod's service account)`,
    `  ${'--context NAME'.padEnd(width)} kubeconfig context to use (default: its current-context)`,
  ].join('\n');
}
