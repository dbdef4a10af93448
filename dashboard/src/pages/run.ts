// One run: its steps with their metrics, the loss curve of its train step, its error and its
// gate decision. A run in progress updates live from server-sent events.
import type { Chart } from "chart.js";
import { api, type Rollout, type RunDetail, type Step } from "../api";
import { lineChart } from "../charts";
import { h, seconds, table, when } from "../dom";

function scalar(value: unknown): string | null {
  if (typeof value === "number") return Number.isInteger(value) ? String(value) : value.toPrecision(4);
  if (typeof value === "string" || typeof value === "boolean") return String(value);
  return null;
}

function metricsList(step: Step): HTMLElement {
  const items = Object.entries(step.metrics).flatMap(([key, value]) => {
    const text = scalar(value);
    if (text !== null) return [h("li", {}, h("code", {}, key), ` ${text}`)];
    if (value && typeof value === "object" && !Array.isArray(value)) {
      const inner = Object.entries(value).map(([k, v]) => [k, scalar(v)]).filter(([, v]) => v !== null);
      return inner.length ? [h("li", {}, h("code", {}, key), ` ${inner.map(([k, v]) => `${k} ${v}`).join(", ")}`)] : [];
    }
    if (Array.isArray(value)) return [h("li", {}, h("code", {}, key), ` ${value.length} values`)];
    return [];
  });
  return h("ul", { class: "metrics" }, ...items);
}

const isSeries = (value: unknown): value is number[] =>
  Array.isArray(value) && value.length > 1 && value.every((v) => typeof v === "number");

/** Every per-step series a step recorded: its `curves` (learner/figures.py), else any list. */
function curves(run: RunDetail): { label: string; values: number[] }[] {
  const found = [];
  for (const step of run.steps) {
    const recorded = step.metrics.curves as Record<string, unknown> | undefined;
    const source = recorded && typeof recorded === "object" ? recorded : step.metrics;
    for (const [key, value] of Object.entries(source)) {
      if (isSeries(value)) found.push({ label: `${step.name}: ${key}`, values: value });
    }
  }
  return found;
}

const VERDICTS: Record<string, string> = { deploy: "deployed", refuse: "refused", defer: "deferred" };

/** The gate's decision and the evidence it rests on (learner/gate.py, learner/evidence.py):
 * items per kind, the effect, the one-sided p-value and lower bound, the safety figures. */
function gate(run: RunDetail): HTMLElement | null {
  const evaluate = run.steps.find((s) => s.name === "evaluate");
  if (!evaluate || !("accepted" in evaluate.metrics)) return null;
  const m = evaluate.metrics;
  const decision = (m.decision as string | undefined) ?? (m.accepted ? "deploy" : "refuse");
  const reasons = (m.reasons as string[] | undefined) ?? [];
  const evidence = (m.evidence as Record<string, unknown> | undefined) ?? {};
  const items = Object.entries((evidence.items as Record<string, number> | undefined) ?? {})
    .map(([kind, n]) => `${n} ${kind}`).join(", ");
  const figures = [
    items ? `held-out items: ${items}` : null,
    scalar(evidence.effect) !== null ? `effect ${scalar(evidence.effect)}` : null,
    scalar(evidence.p_value) !== null ? `p=${scalar(evidence.p_value)} (alpha ${scalar(evidence.alpha)})` : null,
    scalar(evidence.lower) !== null ? `lower bound ${scalar(evidence.lower)}` : null,
    evidence.wins !== undefined ? `${evidence.wins} better, ${evidence.losses} worse` : null,
    scalar(m.kl_to_serving) !== null ? `KL to serving ${scalar(m.kl_to_serving)}` : null,
    (m.perplexity as Record<string, unknown> | undefined)?.ratio !== undefined
      ? `general-code perplexity x${scalar((m.perplexity as Record<string, unknown>).ratio)}` : null,
  ].filter((f): f is string => f !== null);
  const cls = decision === "deploy" ? "ok" : decision === "defer" ? "muted" : "error";
  return h("div", { id: "gate", class: cls },
    h("p", {}, h("strong", {}, `Gate: ${VERDICTS[decision] ?? decision}.`),
      reasons.length ? ` ${reasons.join("; ")}` : ""),
    figures.length ? h("p", { id: "gate-evidence", class: "muted" }, figures.join(" · ")) : null);
}

function rolloutsTable(rollouts: Rollout[]): HTMLElement {
  return table(["trajectory", "task", "adapter", "status", "reward", "steps", "summaries"],
    rollouts.map((r) => [h("a", { href: `#/rollouts/${r.id}` }, r.id.slice(0, 8)), r.instance_id,
      r.adapter ?? "base", r.status + (r.truncated ? " (truncated)" : ""), r.reward.toFixed(2),
      r.steps, r.summaries]), "rollouts");
}

function render(app: HTMLElement, run: RunDetail, charts: Chart[], rollouts: Rollout[]): void {
  charts.splice(0).forEach((c) => c.destroy());
  const stepRows = run.steps.map((s) => [s.name, h("span", { class: `status ${s.status}` }, s.status),
    seconds(run.step_times.find((t) => t.name === s.name)?.seconds), metricsList(s)]);
  const canvases = curves(run).map((curve) => ({ curve, canvas: h("canvas", {}) }));
  app.replaceChildren(h("div", { id: "run" },
    h("h1", {}, `Run #${run.id} `, h("span", { id: "run-status", class: `status ${run.status}` }, run.status)),
    h("p", { class: "muted" }, `${run.kind} cycle, ${run.trigger}; created ${when(run.created_at)}, ` +
      `finished ${when(run.finished_at)}` + (run.adapter_version ? `; made policy-v${run.adapter_version}` : "")),
    run.error ? h("pre", { class: "error", id: "run-error" }, run.error) : null,
    gate(run),
    h("section", { class: "card" }, h("h2", {}, "Steps"),
      table(["step", "status", "took", "metrics"], stepRows, "steps")),
    canvases.length ? h("section", { class: "card" }, h("h2", {}, "Curves, per optimizer step"),
      h("div", { class: "curves" }, ...canvases.map(({ curve, canvas }) =>
        h("figure", {}, h("figcaption", {}, curve.label), h("div", { class: "chart small" }, canvas))))) : null,
    rollouts.length ? h("section", { class: "card" }, h("h2", {}, `Trajectories (${rollouts.length})`),
      rolloutsTable(rollouts)) : null,
  ));
  for (const { curve, canvas } of canvases) {
    charts.push(lineChart(canvas, [{ label: curve.label, points: curve.values.map((y, x) => ({ x: x + 1, y })) }],
      { xLabel: "step", legend: false }));
  }
}

export async function renderRun(app: HTMLElement, id: number): Promise<() => void> {
  const charts: Chart[] = [];
  const run = await api<RunDetail>(`/v1/admin/runs/${id}`);
  let rollouts: Rollout[] = run.kind === "feedback" ? [] : await api<Rollout[]>(`/v1/admin/runs/${id}/rollouts`);
  render(app, run, charts, rollouts);
  const events = new EventSource(`/v1/admin/runs/${id}/events`);
  events.addEventListener("run", async (event) => {
    const next: RunDetail = JSON.parse((event as MessageEvent).data);
    if (next.kind !== "feedback") rollouts = await api<Rollout[]>(`/v1/admin/runs/${id}/rollouts`);
    render(app, next, charts, rollouts);
  });
  let finished = ["succeeded", "failed", "skipped", "deferred"].includes(run.status);
  events.addEventListener("run", (event) => {
    finished = ["succeeded", "failed", "skipped", "deferred"].includes(JSON.parse((event as MessageEvent).data).status);
  });
  // The server ends the stream when the run ends; a stream cut short otherwise (a restart,
  // a proxy) is left to EventSource, which reconnects by itself.
  events.onerror = () => {
    if (finished) events.close();
  };
  return () => {
    events.close();
    charts.forEach((c) => c.destroy());
  };
}
