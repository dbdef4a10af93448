// Line charts on Chart.js, with times as epoch milliseconds on a linear axis (no date adapter
// needed) and optional vertical markers: deployments on the overview's time axis.
import {
  Chart,
  Legend,
  LinearScale,
  LineController,
  LineElement,
  PointElement,
  Tooltip,
  type Plugin,
} from "chart.js";

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

const markers: Plugin<"line"> = {
  id: "markers",
  afterDatasetsDraw(chart, _args, options: { items?: Marker[] }) {
    const { ctx, chartArea, scales } = chart;
    for (const marker of options.items ?? []) {
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
      ctx.fillText(marker.label, x + 3, chartArea.top + 10);
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
