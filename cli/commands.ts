// The CLI's subcommands. Each is loaded only when run, so the sidecar never loads webhook code.
export interface Command {
  summary: string;
  load: () => Promise<{ run(argv: string[]): Promise<number> }>;
}

export const COMMANDS: Record<string, Command> = {
  sidecar: {
    summary: 'run the drain-aware sidecar (configured by DRAINGUARD_* environment variables)',
    load: () => import('../sidecar/main.ts'),
  },
  webhook: {
    summary: 'serve the mutating admission webhook that injects the sidecar (HTTPS)',
    load: () => import('../webhook/main.ts'),
  },
  'netfilter-cleanup': {
    summary: 'remove stale per-pod ebtables rules and neighbours left by a previous CNI (--once)',
    load: () => import('./netfilter-cleanup.ts'),
  },
  status: {
    summary: 'per node (L2 handover, fence, VIPs, exclude label) and guarded Lease (holder, last handover)',
    load: () => import('./status.ts'),
  },
  reset: {
    summary: "undo drainguard's label, annotations and (--local) nft tables after its sidecar is gone",
    load: () => import('./reset.ts'),
  },
};
