// The suite's only source of randomness: a PRNG seeded from (SEED, TRIAL), so a trial's plan is a
// function of those two numbers alone and `make robustness SEED=… TRIAL=…` replays it.
// mulberry32 (32-bit state, good enough for picking faults and moments), seeded through a
// splitmix32-style mix of both numbers so neighbouring trials do not start from neighbouring states.

export interface Rng {
  /** Uniform in [0, 1). */
  next(): number;
  /** Uniform integer in [lo, hi] (both included). */
  int(lo: number, hi: number): number;
  pick<T>(xs: readonly T[]): T;
  chance(p: number): boolean;
}

function mix(h: number): number {
  let z = (h + 0x9e3779b9) | 0;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  return (z ^ (z >>> 16)) >>> 0;
}

export function trialRng(seed: number, trial: number): Rng {
  if (!Number.isSafeInteger(seed) || !Number.isSafeInteger(trial))
    throw new Error(`seed and trial must be integers (got ${seed}, ${trial})`);
  // Both numbers folded in, the high bits of a large seed too.
  let a = mix(mix(seed >>> 0) ^ mix(Math.floor(seed / 2 ** 32)) ^ mix(trial + 0x6d2b79f5));
  const next = () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
    pick: <T>(xs: readonly T[]) => {
      if (xs.length === 0) throw new Error('pick from an empty list');
      return xs[Math.floor(next() * xs.length)] as T;
    },
    chance: (p) => next() < p,
  };
}
