// Adapters and deployments: lineage (parent -> child), metrics at publish, which one serves;
// roll back to any published version or the base model, and start a learning cycle, each
// behind a confirm.
import { api, type Adapter, type Deployment, type Run } from "../api";
import { adapterName, h, table, when } from "../dom";

function brief(metrics: Record<string, unknown>): string {
  return Object.entries(metrics).filter(([, v]) => typeof v === "number")
    .slice(0, 4).map(([k, v]) => `${k} ${(v as number).toPrecision(3)}`).join(", ") || "—";
}

export async function renderAdapters(app: HTMLElement, notice?: { text: string; ok: boolean }): Promise<void> {
  const [adapters, deployments] = await Promise.all([
    api<Adapter[]>("/v1/admin/adapters"),
    api<Deployment[]>("/v1/admin/deployments?limit=100"),
  ]);
  const serving = deployments.find((d) => d.status === "active");
  const message = h("p", { id: "action-message", role: "status", class: notice ? (notice.ok ? "ok" : "error") : "" },
    notice?.text ?? "");

  async function act(question: string, run: () => Promise<string>): Promise<void> {
    if (!window.confirm(question)) return;
    let result;
    try {
      result = { text: await run(), ok: true };
    } catch (error) {
      result = { text: String(error instanceof Error ? error.message : error), ok: false };
    }
    await renderAdapters(app, result); // the tables as they are now, with what happened
  }

  const rollback = (version: number | null) => () =>
    act(`Serve ${adapterName(version)} again? The server loads it and checks it answers first.`,
      async () => {
        const d = await api<Deployment>("/v1/admin/rollback", { method: "POST",
          body: JSON.stringify({ version, reason: "rollback from the dashboard" }) });
        return `Now serving ${adapterName(d.adapter_version)}.`;
      });
  const trigger = () => act("Start a learning cycle now?", async () => {
    const run = await api<Run>("/v1/admin/runs", { method: "POST", body: "{}" });
    return `Run #${run.id} queued.`;
  });

  const rows = adapters.map((a) => [
    a.name,
    `${adapterName(a.parent_version)} → ${a.name}`,
    h("span", { class: `status ${a.status}` }, a.status),
    serving?.adapter_version === a.version ? h("strong", { class: "serving" }, "serving") : "",
    a.run_id === null ? "—" : h("a", { href: `#/runs/${a.run_id}` }, `#${a.run_id}`),
    when(a.created_at),
    brief(a.metrics),
    a.status === "published" && serving?.adapter_version !== a.version
      ? h("button", { type: "button", "data-version": String(a.version), onclick: rollback(a.version) },
          "Roll back to this") : "",
  ]);
  const deploymentRows = deployments.map((d) => [String(d.id), adapterName(d.adapter_version), d.backend,
    h("span", { class: `status ${d.status}` }, d.status), d.reason ?? "", when(d.created_at)]);
  app.replaceChildren(
    h("h1", {}, "Adapters and deployments"),
    h("div", { class: "filters" },
      h("button", { type: "button", id: "trigger", onclick: trigger }, "Start a learning cycle"),
      serving?.adapter_version !== null && serving !== undefined
        ? h("button", { type: "button", id: "rollback-base", onclick: rollback(null) }, "Serve the base model")
        : null),
    message,
    h("section", { class: "card" }, h("h2", {}, "Adapters"),
      adapters.length ? table(["adapter", "lineage", "status", "", "run", "created", "metrics at publish", ""],
        rows, "adapters") : h("p", { class: "muted" }, "No adapters yet.")),
    h("section", { class: "card" }, h("h2", {}, "Deployments"),
      table(["id", "serves", "backend", "status", "reason", "when"], deploymentRows, "deployments")),
  );
}
