// Tasks: the held-out solve rate of each task (or mixed) cycle's serving adapter and of its
// candidate, over the runs, and the newest rate measured for each adapter version.
import { api, type SolveRates } from "../api";
import { lineChart } from "../charts";
import { adapterName, h, percent, table, when } from "../dom";

const rate = (value: number | null) => (value === null ? "—" : percent(value, 1));

export async function renderTasks(app: HTMLElement): Promise<void> {
  const runs = await api<SolveRates[]>("/v1/admin/tasks/solve-rates?limit=200");
  const perAdapter = new Map<string, { rate: number; run: number }>();
  for (const r of runs) { // newest first: the first figure seen for an adapter is its newest
    const serving = adapterName(r.serving_version);
    if (r.serving !== null && !perAdapter.has(serving)) perAdapter.set(serving, { rate: r.serving, run: r.run_id });
    if (r.adapter_version !== null && r.candidate !== null && !perAdapter.has(adapterName(r.adapter_version))) {
      perAdapter.set(adapterName(r.adapter_version), { rate: r.candidate, run: r.run_id });
    }
  }
  const canvas = h("canvas", { id: "chart-solve" });
  const ordered = [...runs].reverse();
  app.replaceChildren(h("div", {},
    h("h1", {}, "Tasks"),
    runs.length === 0 ? h("p", { class: "muted", id: "no-task-runs" },
      "No task cycle has been evaluated yet (apprentice learn --tasks REPO, docs/tasks.md).") : null,
    h("section", { class: "card" }, h("h2", {}, "Held-out solve rate per cycle"),
      h("div", { class: "chart" }, canvas)),
    h("section", { class: "card" }, h("h2", {}, "Newest held-out solve rate per adapter"),
      table(["adapter", "solve rate", "measured in"], [...perAdapter].sort().map(([name, v]) =>
        [name, rate(v.rate), h("a", { href: `#/runs/${v.run}` }, `run #${v.run}`)]), "adapter-solve")),
    h("section", { class: "card" }, h("h2", {}, "Cycles"),
      table(["run", "status", "created", "serving", "its rate", "candidate rate", "gate", "published"],
        runs.map((r) => [h("a", { href: `#/runs/${r.run_id}` }, `#${r.run_id}`), r.status, when(r.created_at),
          adapterName(r.serving_version), rate(r.serving), rate(r.candidate),
          r.accepted === null ? "—" : r.accepted ? "accepted" : "refused",
          r.adapter_version === null ? "—" : adapterName(r.adapter_version)]), "task-runs")),
  ));
  lineChart(canvas, [
    { label: "serving adapter", points: ordered.filter((r) => r.serving !== null).map((r) => ({ x: r.run_id, y: r.serving! })) },
    { label: "candidate", points: ordered.filter((r) => r.candidate !== null).map((r) => ({ x: r.run_id, y: r.candidate! })) },
  ], { percent: true, xLabel: "run" });
}
