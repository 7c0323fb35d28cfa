// Reading one value of the contract from its text: the parsers of a whole number, a boolean and a
// choice (the webhook's flags use them too), one variable's value as its spec says, and its default.
import { CONTRACT, type SidecarConfig, type VarSpec } from './contract.ts';

const splitList = (raw: string) =>
  raw
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');

/** A value read from text, or what is accepted instead (the caller names the variable, annotation or flag). */
export type Parsed<T> = { value: T } | { problem: string };

export function parseWholeNumber(
  raw: string,
  min = Number.MIN_SAFE_INTEGER,
  max = Number.MAX_SAFE_INTEGER,
): Parsed<number> {
  const n = /^-?\d+$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isInteger(n) || n < min || n > max)
    return { problem: `accepted is a whole number from ${min} to ${max}` };
  return { value: n };
}

export function parseBoolean(raw: string): Parsed<boolean> {
  if (raw === 'true' || raw === 'false') return { value: raw === 'true' };
  return { problem: 'accepted values are true, false' };
}

export function parseChoice<T extends string>(raw: string, accepted: readonly T[]): Parsed<T> {
  if ((accepted as readonly string[]).includes(raw)) return { value: raw as T };
  return { problem: `accepted values are ${accepted.join(', ')}` };
}

/** One variable's value from its text as its spec says; empty text means its default. */
export function parseVar(spec: VarSpec, given: string): Parsed<unknown> {
  const raw = given === '' ? (spec.default ?? '') : given;
  const accepted = spec.accepted ?? [];
  switch (spec.kind) {
    case 'string':
      return { value: raw };
    case 'list':
      return { value: splitList(raw) };
    case 'bool':
      return parseBoolean(raw);
    case 'int':
      return parseWholeNumber(raw, spec.min, spec.max);
    case 'port-list': {
      const items = splitList(raw);
      const bad = items.filter((p) => !/^\d+$/.test(p) || Number(p) < 1 || Number(p) > 65535);
      if (bad.length > 0) return { problem: 'accepted is a comma-separated list of ports 1-65535' };
      return { value: items.map(Number) };
    }
    case 'enum':
      return parseChoice(raw, accepted);
    case 'enum-list': {
      const items = splitList(raw);
      const bad = items.filter((i) => !accepted.includes(i));
      if (bad.length > 0)
        return { problem: `unknown ${bad.join(', ')}; accepted values are ${accepted.join(', ')}` };
      return { value: [...new Set(items)] };
    }
  }
}

const DEFAULTS = new Map(
  CONTRACT.filter((v) => !v.required).map((v) => [v.key, (parseVar(v, '') as { value: unknown }).value]),
);
/** A variable's default value, for a webhook decision that depends on it (the grace period covers the budget). */
export const defaultOf = <K extends keyof SidecarConfig>(key: K): SidecarConfig[K] =>
  DEFAULTS.get(key) as SidecarConfig[K];
