// A tiny Prometheus text-format registry: the sidecar runs on every node, so it carries
// no metrics library; the webhook uses the same one.

type Labels = Record<string, string>;

/** A label set as Prometheus text (sorted, escaped), without braces; also the key of its series. */
const labelText = (labels: Labels) =>
  Object.keys(labels)
    .sort()
    .map(
      (k) => `${k}="${String(labels[k]).replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`,
    )
    .join(',');

/** One sample line: the name, the label set in braces if any, the value. */
const sampleLine = (name: string, labels: string, value: number) =>
  `${name}${labels ? `{${labels}}` : ''} ${value}`;

/** What every metric has: a name, a help text, a type, and its samples' lines. */
abstract class Metric {
  readonly name: string;
  readonly help: string;
  private readonly type: string;
  constructor(name: string, help: string, type: string) {
    this.name = name;
    this.help = help;
    this.type = type;
  }
  protected abstract samples(): string[];
  render(): string {
    return [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} ${this.type}`, ...this.samples()].join(
      '\n',
    );
  }
}

/** One number per label set: counters and gauges. */
abstract class SingleValueMetric extends Metric {
  protected readonly values = new Map<string, number>();
  protected samples(): string[] {
    return [...this.values].map(([k, v]) => sampleLine(this.name, k, v));
  }
}

export class Counter extends SingleValueMetric {
  constructor(name: string, help: string) {
    super(name, help, 'counter');
  }
  inc(labels: Labels = {}, by = 1): void {
    const k = labelText(labels);
    this.values.set(k, (this.values.get(k) ?? 0) + by);
  }
  get(labels: Labels = {}): number {
    return this.values.get(labelText(labels)) ?? 0;
  }
}

export class Gauge extends SingleValueMetric {
  constructor(name: string, help: string) {
    super(name, help, 'gauge');
  }
  set(labels: Labels, value: number): void {
    this.values.set(labelText(labels), value);
  }
  get(labels: Labels = {}): number | undefined {
    return this.values.get(labelText(labels));
  }
}

export class Histogram extends Metric {
  private readonly series = new Map<string, { counts: number[]; sum: number; count: number }>();
  readonly buckets: number[];
  constructor(name: string, help: string, buckets: number[]) {
    super(name, help, 'histogram');
    this.buckets = [...buckets].sort((a, b) => a - b);
  }
  observe(labels: Labels, value: number): void {
    const k = labelText(labels);
    let s = this.series.get(k);
    if (!s) {
      s = { counts: this.buckets.map(() => 0), sum: 0, count: 0 };
      this.series.set(k, s);
    }
    for (let i = 0; i < this.buckets.length; i++) if (value <= (this.buckets[i] as number)) s.counts[i]! += 1;
    s.sum += value;
    s.count += 1;
  }
  protected samples(): string[] {
    const lines: string[] = [];
    for (const [k, s] of this.series) {
      const sep = k ? `${k},` : '';
      for (const [i, b] of this.buckets.entries())
        lines.push(`${this.name}_bucket{${sep}le="${b}"} ${s.counts[i]}`);
      lines.push(`${this.name}_bucket{${sep}le="+Inf"} ${s.count}`);
      lines.push(sampleLine(`${this.name}_sum`, k, s.sum));
      lines.push(sampleLine(`${this.name}_count`, k, s.count));
    }
    return lines;
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
