// A tiny Prometheus text-format registry: the sidecar runs on every node, so it carries
// no metrics library; the webhook uses the same one.

type Labels = Record<string, string>;

const key = (labels: Labels) =>
  Object.keys(labels)
    .sort()
    .map(
      (k) => `${k}="${String(labels[k]).replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`,
    )
    .join(',');

interface Metric {
  render(): string;
}

export class Counter implements Metric {
  private readonly values = new Map<string, number>();
  readonly name: string;
  readonly help: string;
  constructor(name: string, help: string) {
    this.name = name;
    this.help = help;
  }
  inc(labels: Labels = {}, by = 1): void {
    const k = key(labels);
    this.values.set(k, (this.values.get(k) ?? 0) + by);
  }
  get(labels: Labels = {}): number {
    return this.values.get(key(labels)) ?? 0;
  }
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} counter`];
    for (const [k, v] of this.values) lines.push(`${this.name}${k ? `{${k}}` : ''} ${v}`);
    return lines.join('\n');
  }
}

export class Gauge implements Metric {
  private readonly values = new Map<string, number>();
  readonly name: string;
  readonly help: string;
  constructor(name: string, help: string) {
    this.name = name;
    this.help = help;
  }
  set(labels: Labels, value: number): void {
    this.values.set(key(labels), value);
  }
  get(labels: Labels = {}): number | undefined {
    return this.values.get(key(labels));
  }
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} gauge`];
    for (const [k, v] of this.values) lines.push(`${this.name}${k ? `{${k}}` : ''} ${v}`);
    return lines.join('\n');
  }
}

export class Histogram implements Metric {
  private readonly series = new Map<string, { counts: number[]; sum: number; count: number }>();
  readonly name: string;
  readonly help: string;
  readonly buckets: number[];
  constructor(name: string, help: string, buckets: number[]) {
    this.name = name;
    this.help = help;
    this.buckets = [...buckets].sort((a, b) => a - b);
  }
  observe(labels: Labels, value: number): void {
    const k = key(labels);
    let s = this.series.get(k);
    if (!s) {
      s = { counts: this.buckets.map(() => 0), sum: 0, count: 0 };
      this.series.set(k, s);
    }
    for (let i = 0; i < this.buckets.length; i++) if (value <= (this.buckets[i] as number)) s.counts[i]! += 1;
    s.sum += value;
    s.count += 1;
  }
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`];
    for (const [k, s] of this.series) {
      const sep = k ? `${k},` : '';
      for (const [i, b] of this.buckets.entries())
        lines.push(`${this.name}_bucket{${sep}le="${b}"} ${s.counts[i]}`);
      lines.push(`${this.name}_bucket{${sep}le="+Inf"} ${s.count}`);
      lines.push(`${this.name}_sum${k ? `{${k}}` : ''} ${s.sum}`);
      lines.push(`${this.name}_count${k ? `{${k}}` : ''} ${s.count}`);
    }
    return lines.join('\n');
  }
}

export class Registry {
  private readonly metrics = new Map<string, Metric>();
  counter(name: string, help: string): Counter {
    return this.add(name, () => new Counter(name, help)) as Counter;
  }
  gauge(name: string, help: string): Gauge {
    return this.add(name, () => new Gauge(name, help)) as Gauge;
  }
  histogram(name: string, help: string, buckets: number[]): Histogram {
    return this.add(name, () => new Histogram(name, help, buckets)) as Histogram;
  }
  private add(name: string, make: () => Metric): Metric {
    if (!/^drainguard_[a-z0-9_]+$/.test(name))
      throw new Error(`metric name ${name} must match drainguard_[a-z0-9_]+`);
    let m = this.metrics.get(name);
    if (!m) {
      m = make();
      this.metrics.set(name, m);
    }
    return m;
  }
  render(): string {
    return `${[...this.metrics.values()].map((m) => m.render()).join('\n')}\n`;
  }
}
