// Line charts on Chart.js: `lineChart` for curves over steps or runs; `timeChart` for the
// overview, with times as epoch milliseconds on a linear axis (no date adapter needed) that
// spans exactly the chosen range, ticks and series from timeline.ts, and vertical markers:
// deployments on the time axis. An empty time chart is a sentence, not an axis.
import {
  Chart,
  Legend,
  LinearScale,
  LineController,
  LineElement,
  PointElement,
  Tooltip,
  type Plugin,
  type PointStyle,
} from "chart.js";
import { isEmpty, pointRadii, ticks, type Point, type Series as TimeSeries } from "./timeline";

Chart.register(LineController, LineElement, PointElement, LinearScale, Legend, Tooltip);

export interface Series {
  label: string;
  points: { x: number; y: number }[];
}

export interface Marker {
  x: number;
  label: string;
}

const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4b5563"];
const STYLES: PointStyle[] = ["circle", "triangle", "rect", "rectRot", "star", "crossRot"];

const markers: Plugin<"line"> = {
  id: "markers",
  afterDatasetsDraw(chart, _args, options: { items?: Marker[] }) {
    const { ctx, chartArea, scales } = chart;
    const rows: number[] = []; // per row of labels, where its last label ends (no overlaps)
    for (const marker of [...(options.items ?? [])].sort((a, b) => a.x - b.x)) {
      const x = scales.x.getPixelForValue(marker.x);
      if (x < chartArea.left || x > chartArea.right) continue;
      ctx.save();
      ctx.strokeStyle = "#6b7280";
      ctx.setLineDash([4, 4]);
      ctx.beginPath();
      ctx.moveTo(x, chartArea.top);
      ctx.lineTo(x, chartArea.bottom);
      ctx.stroke();
      ctx.fillStyle = "#374151";
      ctx.font = "11px sans-serif";
      // Beside the line, on whichever side the label fits inside the chart, and in the first
      // row where it overlaps no other label.
      const width = ctx.measureText(marker.label).width;
      const right = x + 3 + width <= chartArea.right;
      const left = right ? x + 3 : x - 3 - width;
      let row = rows.findIndex((end) => end + 4 <= left);
      if (row < 0) row = rows.push(0) - 1;
      rows[row] = left + width;
      ctx.textAlign = "left";
      ctx.fillText(marker.label, left, chartArea.top + 10 + 12 * row);
      ctx.restore();
    }
  },
};

export function lineChart(
  canvas: HTMLCanvasElement,
  series: Series[],
  options: { time?: boolean; percent?: boolean; markers?: Marker[]; xLabel?: string; legend?: boolean } = {},
): Chart<"line"> {
  return new Chart(canvas, {
    type: "line",
    data: {
      datasets: series.map((s, i) => ({
        label: s.label,
        data: s.points,
        borderColor: COLORS[i % COLORS.length],
        backgroundColor: COLORS[i % COLORS.length],
        pointRadius: s.points.length > 60 ? 0 : 2,
        tension: 0.2,
      })),
    },
    options: {
      animation: false,
      responsive: true,
      maintainAspectRatio: false,
      parsing: false,
      plugins: {
        legend: { position: "bottom", display: options.legend ?? true },
        // @ts-expect-error: the markers plugin's options are ours
        markers: { items: options.markers ?? [] },
      },
      scales: {
        x: {
          type: "linear",
          title: { display: !!options.xLabel, text: options.xLabel ?? "" },
          ticks: options.time
            ? { callback: (value) => new Date(Number(value)).toISOString().slice(5, 16).replace("T", " ") }
            : {},
        },
        y: {
          type: "linear",
          beginAtZero: true,
          ...(options.percent ? { max: 1, ticks: { callback: (v) => `${Math.round(Number(v) * 100)}%` } } : {}),
        },
      },
    },
    plugins: [markers],
  });
}

const utc = (ms: number): string => new Date(ms).toISOString().slice(0, 16).replace("T", " ") + " UTC";
const pct = (v: number): string => `${(100 * v).toFixed(1)}%`;

/** A chart over [since, until] in `box` (one series per adapter, each in its own colour and
 * point style, with a legend), or, when no series has a point, a line saying so. The canvas
 * carries what it draws for the end-to-end test: data-series, data-ticks, data-since/until. */
export function timeChart(
  box: HTMLElement,
  id: string,
  series: TimeSeries[],
  options: { since: number; until: number; percent?: boolean; markers?: Marker[]; empty: string },
): Chart<"line"> | null {
  const { since, until } = options;
  if (isEmpty(series)) {
    const note = document.createElement("p");
    note.id = `${id}-empty`;
    note.className = "no-data muted";
    note.textContent = options.empty;
    box.classList.add("empty");
    box.replaceChildren(note);
    return null;
  }
  const axis = ticks(since, until);
  const labels = new Map(axis.map((t) => [t.value, t.label]));
  const canvas = document.createElement("canvas");
  canvas.id = id;
  Object.assign(canvas.dataset, {
    series: series.map((s) => s.label).join("|"), ticks: axis.map((t) => t.label).join("|"),
    since: String(since), until: String(until),
  });
  box.classList.remove("empty");
  box.replaceChildren(canvas);
  return new Chart(canvas, {
    type: "line",
    data: {
      datasets: series.map((s) => ({
        label: s.label,
        data: s.points as unknown as { x: number; y: number }[], // y null: a gap
        borderColor: COLORS[s.order % COLORS.length],
        backgroundColor: COLORS[s.order % COLORS.length],
        // Hollow points in the series' own shape: where two adapters meet, both show.
        pointStyle: STYLES[s.order % STYLES.length],
        pointRadius: pointRadii(s.points),
        pointBackgroundColor: "rgba(0, 0, 0, 0)",
        pointBorderWidth: 2,
        pointHoverRadius: 6,
        spanGaps: true,
        tension: 0.2,
        clip: 8, // a point on the axis' edge (now, 100 %) is drawn whole
      })),
    },
    options: {
      animation: false,
      responsive: true,
      maintainAspectRatio: false,
      parsing: false,
      interaction: { mode: "nearest", intersect: false },
      plugins: {
        legend: { position: "bottom", labels: { usePointStyle: true } },
        tooltip: {
          callbacks: {
            title: (items) => (items.length ? utc(items[0].parsed.x ?? 0) : ""),
            label: (item) => {
              const p = item.raw as Point;
              const value = options.percent ? pct(p.y ?? 0) : String(p.y);
              return `${item.dataset.label}: ${value} (${p.k} of ${p.n})`;
            },
          },
        },
        // @ts-expect-error: the markers plugin's options are ours
        markers: { items: options.markers ?? [] },
      },
      scales: {
        x: {
          type: "linear",
          min: since,
          max: until,
          title: { display: true, text: "time (UTC)" },
          afterBuildTicks: (scale) => {
            scale.ticks = axis.map((t) => ({ value: t.value }));
          },
          ticks: { callback: (value) => labels.get(Number(value)) ?? "", maxRotation: 0 },
        },
        y: {
          type: "linear",
          beginAtZero: true,
          ...(options.percent
            ? { max: 1, ticks: { callback: (v) => `${Math.round(Number(v) * 100)}%` } }
            : {}),
        },
      },
    },
    plugins: [markers],
  });
}
