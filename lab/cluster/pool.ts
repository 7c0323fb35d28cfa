// The lab's MetalLB address pool on the switch's segment: cluster.ts (the HA lab's API VIP is its
// last address) and metallb.ts (the pool it configures) both read it, neither from the other.

/** The pool's first and last host number on the switch's segment. */
export const LAB_POOL_HOSTS = [100, 199] as const;
