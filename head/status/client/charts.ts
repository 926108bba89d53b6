import uPlot from 'uplot';
import { fmtMiB, fmtMs, fmtNumber } from './html.js';
import type { StatusSeries } from './protocol.js';

/**
 * The page's copy of the head's time series: it gets the whole history on connecting and only new
 * samples after that, and keeps what the head keeps (ten minutes by default).
 */
export class SeriesBuffer {
  times: number[] = [];
  readonly values = new Map<string, (number | null)[]>();

  apply(delta: StatusSeries, full: boolean, historySeconds: number): void {
    if (full) {
      this.times = [];
      this.values.clear();
    }
    const last = this.times.at(-1) ?? -Infinity;
    // A sample the page already has (never expected, but a duplicate would draw a zig-zag).
    const skip = delta.times.findIndex((t) => t > last);
    if (skip < 0) return;
    const before = this.times.length;
    const added = delta.times.length - skip;
    this.times.push(...delta.times.slice(skip));
    for (const [id, column] of Object.entries(delta.values)) {
      let mine = this.values.get(id);
      if (!mine) {
        mine = new Array<number | null>(before).fill(null);
        this.values.set(id, mine);
      }
      mine.push(...column.slice(skip));
    }
    for (const mine of this.values.values()) while (mine.length < before + added) mine.push(null);
    const keep = Math.max(historySeconds, 1);
    if (this.times.length > keep) {
      const drop = this.times.length - keep;
      this.times.splice(0, drop);
      for (const mine of this.values.values()) mine.splice(0, drop);
    }
    for (const [id, mine] of this.values) if (mine.every((v) => v === null)) this.values.delete(id);
  }

  /** Series of one metric (`rps`, `util`, ...) by subject, in a stable order. */
  metric(metric: string): [string, (number | null)[]][] {
    const prefix = `${metric}|`;
    return [...this.values.entries()]
      .filter(([id]) => id.startsWith(prefix))
      .map(([id, v]): [string, (number | null)[]] => [id.slice(prefix.length), v])
      .sort(([a], [b]) => a.localeCompare(b, 'en', { numeric: true }));
  }
}

const PALETTE = ['#2f6feb', '#d1495b', '#1f9e89', '#e08e0b', '#8957e5', '#0096c7', '#bf5b17', '#5a8f29', '#c2185b', '#6e7781'];
const colours = new Map<string, string>();
/** One colour per deployment or GPU, the same in every chart and for as long as the page is open. */
export function colourOf(subject: string): string {
  let c = colours.get(subject);
  if (!c) {
    c = PALETTE[colours.size % PALETTE.length]!;
    colours.set(subject, c);
  }
  return c;
}

interface Line {
  label: string;
  subject: string;
  values: (number | null)[];
  dash?: number[];
}

export interface ChartSpec {
  key: string;
  /** Lines to draw from the buffer. */
  lines: (buffer: SeriesBuffer) => Line[];
  format: (v: number) => string;
  /** A fixed y range (utilisation is 0..100); otherwise 0 to a bit above the largest value. */
  max?: number;
  /** Join a line across samples without a value (latency and batch size exist only where calls ran). */
  spanGaps?: boolean;
  empty: string;
}

/** How a line is named: its deployment or GPU, or for `*` (the head's aggregate, past a dozen subjects) what it adds up. */
const ALL_LABELS: Record<string, string> = {
  rps: 'all deployments',
  p50: 'all calls',
  p99: 'all calls',
  queue: 'all deployments',
  batch: 'all batches',
  util: 'mean of all GPUs',
  mem: 'all GPUs',
};
const label = (metric: string, subject: string): string => (subject === '*' ? (ALL_LABELS[metric] ?? 'all') : subject);
const lines = (b: SeriesBuffer, metric: string): Line[] =>
  b.metric(metric).map(([s, values]) => ({ label: label(metric, s), subject: s, values }));

export const CHARTS: ChartSpec[] = [
  {
    key: 'rps',
    lines: (b) => lines(b, 'rps'),
    format: (v) => fmtNumber(v),
    empty: 'No deployment yet.',
  },
  {
    key: 'latency',
    lines: (b) => {
      const p99 = new Map(b.metric('p99'));
      return b.metric('p50').flatMap(([s, values]) => [
        { label: `${label('p50', s)} p50`, subject: s, values },
        { label: `${label('p99', s)} p99`, subject: s, values: p99.get(s) ?? [], dash: [5, 4] },
      ]);
    },
    format: (v) => fmtMs(v),
    spanGaps: true,
    empty: 'No calls yet.',
  },
  {
    key: 'queue',
    lines: (b) => lines(b, 'queue'),
    format: (v) => fmtNumber(v, 0),
    empty: 'No deployment yet.',
  },
  {
    key: 'batch',
    lines: (b) => lines(b, 'batch'),
    format: (v) => fmtNumber(v),
    spanGaps: true,
    empty: 'No batches run yet.',
  },
  {
    key: 'util',
    lines: (b) => lines(b, 'util'),
    format: (v) => `${Math.round(v)} %`,
    max: 100,
    empty: 'No GPU in the cluster.',
  },
  {
    key: 'mem',
    lines: (b) => lines(b, 'mem'),
    format: (v) => fmtMiB(v),
    empty: 'No measured GPU memory (simulated GPUs are not measured).',
  },
];

const clock = (seconds: number): string => new Date(seconds * 1000).toLocaleTimeString('en-GB', { hour12: false });

/** A round number at or above `v` (1, 2, 2.5, 5 times a power of ten), so the top of the axis has a label. */
function niceCeiling(v: number): number {
  if (!(v > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(v));
  return ([1, 2, 2.5, 5, 10].find((m) => m * power >= v) ?? 10) * power;
}

/** The newest value of a line: what its legend shows while the pointer is not over the chart. */
function latest(values: ArrayLike<number | null | undefined> | undefined): number | null {
  for (let i = (values?.length ?? 0) - 1; i >= 0; i--) {
    const v = values![i];
    if (v !== null && v !== undefined) return v;
  }
  return null;
}

const AXIS = {
  stroke: '#57606a',
  font: '11px system-ui, sans-serif',
  grid: { stroke: '#eceff3', width: 1 },
  ticks: { stroke: '#d0d7de', width: 1, size: 4 },
};

/** One uPlot chart in its card; rebuilt when its set of lines changes, otherwise only fed new data. */
export class Chart {
  readonly #spec: ChartSpec;
  readonly #host: HTMLElement;
  readonly #note: HTMLElement;
  #plot: uPlot | undefined;
  #shape = '';
  /** The caption's note, and what it says of per-subject lines ("per deployment"). */
  readonly #caption: HTMLElement | null;
  readonly #perSubject: string;

  constructor(spec: ChartSpec, host: HTMLElement, note: HTMLElement, caption: HTMLElement | null = null) {
    this.#spec = spec;
    this.#host = host;
    this.#note = note;
    this.#caption = caption;
    this.#perSubject = caption?.textContent ?? '';
    new ResizeObserver(() => this.#plot?.setSize(this.#size())).observe(host);
  }

  /** "per deployment" becomes "the whole cluster"; a note that says something else keeps it. */
  #wholeCluster(): string {
    return this.#perSubject.startsWith('per ') ? 'the whole cluster' : `the whole cluster · ${this.#perSubject}`;
  }

  #size(): { width: number; height: number } {
    return { width: Math.max(200, this.#host.clientWidth), height: 170 };
  }

  update(buffer: SeriesBuffer): void {
    const lines = this.#spec.lines(buffer);
    this.#note.hidden = lines.length > 0;
    this.#note.textContent = this.#spec.empty;
    // Past a dozen deployments or GPUs the head sends the cluster's aggregate lines instead.
    if (this.#caption) this.#caption.textContent = lines.some((l) => l.subject === '*') ? this.#wholeCluster() : this.#perSubject;
    const data: uPlot.AlignedData = [buffer.times.map((t) => t / 1000), ...lines.map((l) => l.values)];
    const shape = lines.map((l) => l.label).join('\n');
    if (shape !== this.#shape || !this.#plot) {
      this.#plot?.destroy();
      this.#plot = undefined;
      this.#shape = shape;
      if (lines.length === 0) return;
      this.#plot = new uPlot(this.#options(lines), data, this.#host);
      return;
    }
    this.#plot.setData(data);
    // With the pointer elsewhere, the legend reads the newest values (see `latest` below).
    if (this.#plot.cursor.idx === null || this.#plot.cursor.idx === undefined) this.#plot.setLegend({ idx: null as unknown as number });
  }

  #options(lines: Line[]): uPlot.Options {
    const fmt = this.#spec.format;
    const max = this.#spec.max;
    return {
      ...this.#size(),
      cursor: { drag: { x: false, y: false } },
      legend: { live: true },
      scales: {
        x: { time: true },
        y: { range: (_u, _min, hi) => [0, max ?? niceCeiling(hi * 1.1)] },
      },
      axes: [
        { ...AXIS, space: 64, values: (_u, ticks) => ticks.map((t) => clock(t)) },
        { ...AXIS, size: 62, values: (_u, ticks) => ticks.map((t) => fmt(t)) },
      ],
      series: [
        { value: (_u, v) => (v === null ? '–' : clock(v)) },
        ...lines.map((l): uPlot.Series => ({
          label: l.label,
          stroke: colourOf(l.subject),
          width: 2,
          ...(l.dash ? { dash: l.dash } : {}),
          points: { show: false },
          spanGaps: this.#spec.spanGaps ?? false,
          value: (u, v, si, idx) => {
            const shown = idx === null ? latest(u.data[si]) : v;
            return shown === null || shown === undefined ? '–' : fmt(shown);
          },
        })),
      ],
    };
  }
}
