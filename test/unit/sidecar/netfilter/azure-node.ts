// The recorded state of a real azure-vnet node after a switch to another CNI (test/golden/netfilter/
// azure-node/: ebtables listings, ip -j and bridge -j output, its pods, what must go and stay).
import { readFileSync } from 'node:fs';

/** One recorded file of the azure node, as text. */
export const azureNodeFile = (f: string): string =>
  readFileSync(new URL(`../../../golden/netfilter/azure-node/${f}`, import.meta.url), 'utf8');
