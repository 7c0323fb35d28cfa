// Where a feature's Events go: its own Node (what `kubectl describe node` shows an operator
// draining it) and its own Pod. Named once, so every feature's Events name them alike.
import type { SidecarConfig } from '../shared/contract.ts';
import type { EventTarget } from '../shared/kube/events.ts';

export const ownNode = (config: SidecarConfig): EventTarget => ({ kind: 'Node', name: config.nodeName });

/** The own Pod, with its UID when the downward API gives it (an Event then names this very pod). */
export const ownPod = (config: SidecarConfig): EventTarget => ({
  kind: 'Pod',
  name: config.podName,
  namespace: config.podNamespace,
  ...(config.podUid ? { uid: config.podUid } : {}),
});
