// Runs: every learner run with its status, trigger, kind, step times and data counts.
import { api, type Run } from "../api";
import { h, seconds, table, when } from "../dom";

function total(run: Run): number | null {
  const times = run.step_times.map((s) => s.seconds);
  return times.length && times.every((t) => t !== null) ? times.reduce((a, b) => a! + b!, 0) : null;
}

export async function renderRuns(app: HTMLElement): Promise<void> {
  const runs = await api<Run[]>("/v1/admin/runs?limit=200");
  const rows = runs.map((run) => [
    h("a", { href: `#/runs/${run.id}` }, `#${run.id}`),
    h("span", { class: `status ${run.status}` }, run.status),
    run.kind,
    run.trigger,
    when(run.created_at),
    seconds(total(run)),
    run.step_times.map((s) => `${s.name} ${seconds(s.seconds)}`).join(" · ") || "—",
    run.dataset ? Object.entries(run.dataset).filter(([, v]) => typeof v === "number")
      .map(([k, v]) => `${k} ${v}`).join(", ") : "—",
    run.adapter_version === null ? "—" : `policy-v${run.adapter_version}`,
  ]);
  app.replaceChildren(
    h("h1", {}, "Runs"),
    runs.length ? table(["run", "status", "kind", "trigger", "created", "took", "steps", "data",
                         "adapter"], rows, "runs") : h("p", { class: "muted", id: "no-runs" }, "No learner runs yet."),
  );
}
