// The overview's time axis and series, as pure functions (no DOM, no Chart.js, no imports: the
// unit tests in test/unit/ run them in Node). All times are epoch milliseconds, in UTC like the
// server's buckets:
//
//   ticks(since, until)                      // [{value, label}]: "15:00"s for a day, "Dec 7"s
//                                             //   for weeks and months, "Mar"s for a year
//   bucketStarts(since, until, bucketMs)     // every bucket the server may answer for
//   adapterSeries(counts, since, until, bucketMs)  // one series per adapter, every bucket
//                                             //   filled (y null where nothing was counted)
//   rateText(rate)                            // "62.5% (30.6–86.3%)"

export const HOUR = 3600_000;
export const DAY = 24 * HOUR;
const WEEK = 7 * DAY;
const MONDAY = 4 * DAY; // 1970-01-01 was a Thursday; weekly ticks fall on Mondays
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/** The overview's ranges: label, days (ending now), the bucket in seconds. */
export const RANGES: [string, number, number][] = [
  ["24 hours", 1, 3600],
  ["7 days", 7, 6 * 3600],
  ["30 days", 30, 86400],
  ["90 days", 90, 86400],
  ["1 year", 365, 7 * 86400],
];

export interface Tick {
  value: number;
  label: string;
}

export interface Point {
  x: number;
  y: number | null; // null: nothing counted in this bucket (a gap, not a zero)
  k: number; // the rate's numerator and denominator, for the tooltip
  n: number;
}

export interface Series {
  label: string;
  order: number; // 0: the base model, N: policy-vN (picks a stable colour and point style)
  points: Point[];
}

/** One bucket's counts: `k` of `n` (e.g. accepted of shown) for the adapter that served. */
export interface BucketCount {
  t: number; // the bucket's start
  adapter_version: number | null;
  k: number;
  n: number;
}

/** `policy-vN`, or `base` for the base model (version null or 0). */
export function adapterName(version: number | null | undefined): string {
  return version ? `policy-v${version}` : "base";
}

const pad = (n: number): string => String(n).padStart(2, "0");
const hourLabel = (d: Date): string => `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}`;
const dayLabel = (d: Date): string => `${MONTHS[d.getUTCMonth()]} ${d.getUTCDate()}`;

type Step = { ms: number } | { months: number };
const STEPS: Step[] = [
  { ms: HOUR }, { ms: 2 * HOUR }, { ms: 3 * HOUR }, { ms: 6 * HOUR }, { ms: 12 * HOUR },
  { ms: DAY }, { ms: 2 * DAY }, { ms: WEEK }, { ms: 2 * WEEK },
  { months: 1 }, { months: 2 }, { months: 3 }, { months: 6 }, { months: 12 },
];

function stepValues(since: number, until: number, step: Step): number[] {
  const values: number[] = [];
  if ("ms" in step) {
    const origin = step.ms >= WEEK ? MONDAY : 0;
    let t = Math.ceil((since - origin) / step.ms) * step.ms + origin;
    for (; t <= until; t += step.ms) values.push(t);
    return values;
  }
  const start = new Date(since);
  let month = start.getUTCFullYear() * 12 + start.getUTCMonth();
  month = Math.ceil(month / step.months) * step.months;
  for (;; month += step.months) {
    const t = Date.UTC(Math.floor(month / 12), month % 12, 1);
    if (t < since) continue;
    if (t > until) return values;
    values.push(t);
  }
}

/** Ticks inside [since, until] at a round step (UTC hours, days, Mondays, months) chosen so
 * there are at most `maxTicks`; labelled for that step: "HH:MM" (midnight as the date) under
 * a day, "Mon D" for days and weeks, "Mon" for months (with the year at January and first). */
export function ticks(since: number, until: number, maxTicks = 10): Tick[] {
  if (!(until > since)) return [];
  let step = STEPS[STEPS.length - 1];
  let values = stepValues(since, until, step);
  for (const candidate of STEPS) {
    const found = stepValues(since, until, candidate);
    if (found.length <= maxTicks) {
      step = candidate;
      values = found;
      break;
    }
  }
  return values.map((value, i) => {
    const d = new Date(value);
    let label: string;
    if ("months" in step) {
      const year = i === 0 || d.getUTCMonth() === 0;
      label = year ? `${MONTHS[d.getUTCMonth()]} ${d.getUTCFullYear()}` : MONTHS[d.getUTCMonth()];
    } else if (step.ms < DAY) {
      label = d.getUTCHours() === 0 && d.getUTCMinutes() === 0 ? dayLabel(d) : hourLabel(d);
    } else {
      label = dayLabel(d);
    }
    return { value, label };
  });
}

/** The starts of the buckets that overlap [since, until), aligned as the server aligns them
 * (multiples of the bucket since the epoch). */
export function bucketStarts(since: number, until: number, bucketMs: number): number[] {
  const starts: number[] = [];
  if (!(bucketMs > 0) || !(until > since)) return starts;
  for (let t = Math.floor(since / bucketMs) * bucketMs; t < until; t += bucketMs) starts.push(t);
  return starts;
}

/** Where a bucket's point goes: the middle of the part of the bucket inside the range (the
 * first and last buckets may reach past it: the hour now running ends after now). */
export function bucketX(start: number, bucketMs: number, since: number, until: number): number {
  return (Math.max(since, start) + Math.min(until, start + bucketMs)) / 2;
}

/** One series per adapter that counted anything (n > 0) in the range, the base model first,
 * then by version; each has a point for every bucket of the range, y = k / n, or null where
 * the adapter counted nothing in that bucket. Counts outside the range are left out. */
export function adapterSeries(
  counts: BucketCount[], since: number, until: number, bucketMs: number,
): Series[] {
  const starts = bucketStarts(since, until, bucketMs);
  const first = starts[0] ?? since;
  const byAdapter = new Map<number, Map<number, { k: number; n: number }>>();
  for (const c of counts) {
    const start = Math.floor(c.t / bucketMs) * bucketMs;
    if (start < first || start >= until || !(c.n > 0)) continue;
    const version = c.adapter_version ?? 0;
    const buckets = byAdapter.get(version) ?? new Map<number, { k: number; n: number }>();
    byAdapter.set(version, buckets);
    const sum = buckets.get(start) ?? { k: 0, n: 0 };
    buckets.set(start, { k: sum.k + c.k, n: sum.n + c.n });
  }
  return [...byAdapter.keys()].sort((a, b) => a - b).map((version) => {
    const buckets = byAdapter.get(version)!;
    return {
      label: adapterName(version),
      order: version,
      points: starts.map((start) => {
        const { k, n } = buckets.get(start) ?? { k: 0, n: 0 };
        return { x: bucketX(start, bucketMs, since, until), y: n > 0 ? Math.min(1, k / n) : null, k, n };
      }),
    };
  });
}

/** The buckets of outcome counts as `k` of `n` per adapter: k counts the kinds in `took`, n
 * those in `took` and `others` (e.g. edits: accepted or partly, of those decided). */
export function outcomeCounts(
  rows: { t: string; adapter_version: number | null; suggestion: string; kind: string; n: number }[],
  suggestion: string, took: string[], others: string[],
): BucketCount[] {
  const out: BucketCount[] = [];
  for (const row of rows) {
    if (row.suggestion !== suggestion) continue;
    const k = took.includes(row.kind) ? row.n : 0;
    const n = k + (others.includes(row.kind) ? row.n : 0);
    if (n > 0) out.push({ t: Date.parse(row.t), adapter_version: row.adapter_version, k, n });
  }
  return out;
}

/** Pixels per point: drawn while there are few, and always where a point stands alone
 * (no neighbour to draw a line to), so a single bucket with data is visible. */
export function pointRadii(points: Point[], few = 60): number[] {
  const shown = points.filter((p) => p.y !== null).length;
  return points.map((p, i) => {
    if (p.y === null) return 0;
    const alone = (points[i - 1]?.y ?? null) === null && (points[i + 1]?.y ?? null) === null;
    return alone || shown <= few ? 4 : 0;
  });
}

/** "62.5% (30.6–86.3%)": a rate and its 95 % interval (the server's); "—" with no n. */
export function rateText(rate: { value: number | null; low: number | null; high: number | null }): string {
  if (rate.value === null || rate.low === null || rate.high === null) return "—";
  const p = (v: number): string => (100 * v).toFixed(1);
  return `${p(rate.value)}% (${p(rate.low)}–${p(rate.high)}%)`;
}

/** True when no series has a single point to draw: the chart says so instead of an axis. */
export function isEmpty(series: Series[]): boolean {
  return series.every((s) => s.points.every((p) => p.y === null));
}
