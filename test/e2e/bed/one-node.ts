// The product's Informer on one Node by name, as the drain watcher holds it: the bed's tests
// watch what it sees.
import type { KubeClient } from '../../../shared/kube/client.ts';
import { Informer, type InformerOptions } from '../../../shared/kube/informer.ts';
import type { Node } from '../../../shared/kube/types.ts';
import { createLogger } from '../../../shared/log.ts';

/** An informer (not started) on the Node `name`; `node()` is its latest view of it. */
export function oneNodeInformer(
  client: KubeClient,
  name: string,
  opts: Pick<InformerOptions, 'idleTimeoutMs'> = {},
): { informer: Informer; node: () => Node | undefined } {
  let latest: Node | undefined;
  const informer = new Informer(client, {
    path: '/api/v1/nodes',
    fieldSelector: `metadata.name=${name}`,
    log: createLogger('test', 'silent'),
    ...opts,
    onChange: (objs) => {
      latest = objs.values().next().value as Node | undefined;
    },
  });
  return { informer, node: () => latest };
}
