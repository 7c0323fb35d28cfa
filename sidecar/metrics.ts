// A feature's metrics as one table — what it exports to dashboards (name, kind, help text),
// read at a glance — registered at once, each typed as its kind.
import type { Counter, Gauge, Histogram, Registry } from '../shared/metrics.ts';

export type MetricSpec =
  | { kind: 'counter'; name: string; help: string }
  | { kind: 'gauge'; name: string; help: string }
  | { kind: 'histogram'; name: string; help: string; buckets: readonly number[] };

type MetricOf<S extends MetricSpec> = S['kind'] extends 'counter'
  ? Counter
  : S['kind'] extends 'gauge'
    ? Gauge
    : Histogram;

export type Metrics<T extends Record<string, MetricSpec>> = { readonly [K in keyof T]: MetricOf<T[K]> };

/** Registers every metric of `table`, in its order (the order of /metrics). */
export function registerMetrics<T extends Record<string, MetricSpec>>(
  registry: Registry,
  table: T,
): Metrics<T> {
  const one = (s: MetricSpec) =>
    s.kind === 'counter'
      ? registry.counter(s.name, s.help)
      : s.kind === 'gauge'
        ? registry.gauge(s.name, s.help)
        : registry.histogram(s.name, s.help, [...s.buckets]);
  return Object.fromEntries(Object.entries(table).map(([key, spec]) => [key, one(spec)])) as Metrics<T>;
}
