// One trajectory of a task cycle: its result and reward terms, its model calls (agent steps
// and self-summaries), the session's events in order, and the diff it left.
import { api, type RolloutDetail } from "../api";
import { h, table } from "../dom";

const MAX_CHARS = 2000;

function clip(text: string): string {
  return text.length > MAX_CHARS ? `${text.slice(0, MAX_CHARS)}\n… (${text.length} characters)` : text;
}

type Data = Record<string, any>; // event payloads are free-form JSON

/** What a person reads of an event: the message, the call, the result, the summary, the
 * proposed diff and its verdict; the raw JSON for anything else. */
function describe(payload: Record<string, unknown>): string {
  const kind = String(payload.kind ?? "");
  const data = (payload.data ?? {}) as Data;
  if (kind === "run_started") {
    return `task:\n${clip(String(data.task ?? ""))}\n\nsystem prompt:\n${clip(String(data.system ?? ""))}`;
  }
  if (kind === "assistant" || kind === "observation") return clip(String(data.message?.content ?? ""));
  if (kind === "tool_call") {
    return clip(`${data.tool}(${JSON.stringify(data.args)})` + (data.thought ? `\nthought: ${data.thought}` : ""));
  }
  if (kind === "summary") return clip(String(data.summary ?? "") + (data.plan ? `\nplan: ${data.plan}` : ""));
  if (kind === "edit_proposed") return clip(String(data.proposal?.diff ?? ""));
  if (kind === "edit_decision") return `verdict: ${data.decision?.verdict}` + (data.decision?.reason ? ` (${data.decision.reason})` : "");
  return clip(JSON.stringify(data, null, 1));
}

export async function renderRollout(app: HTMLElement, id: string): Promise<void> {
  const r = await api<RolloutDetail>(`/v1/admin/rollouts/${encodeURIComponent(id)}`);
  const terms = Object.entries(r.reward_terms).map(([k, v]) => [k, String(v)]);
  app.replaceChildren(h("div", { id: "rollout" },
    h("h1", {}, `Trajectory of ${r.instance_id}`),
    h("p", { class: "muted" }, `${r.kind}, ${r.difficulty}; served by ${r.adapter ?? "base"}; ` +
      `${r.status}${r.truncated ? " (truncated)" : ""}; ${r.steps} steps, ${r.tokens} tokens, ` +
      `${r.summaries} summaries, ${r.wall_s.toFixed(1)} s` + (r.run_id ? `; run #${r.run_id}` : "")),
    r.message ? h("p", {}, r.message) : null,
    h("section", { class: "card" }, h("h2", {}, `Reward ${r.reward}`),
      table(["term", "value"], terms, "reward-terms")),
    h("section", { class: "card" }, h("h2", {}, "Model calls"),
      table(["#", "kind", "tokens", "adapter", "finish"], r.calls.map((c) =>
        [c.seq, c.kind, c.completion_tokens, c.adapter ?? "base", c.finish_reason ?? ""]), "calls")),
    h("section", { class: "card" }, h("h2", {}, "Steps"),
      h("ol", { id: "events", class: "events" }, ...r.events.map((e) =>
        h("li", { class: `event ${e.kind}` }, h("strong", {}, String(e.payload.kind ?? e.kind)),
          e.role ? ` (${e.role})` : "", h("pre", {}, describe(e.payload)))))),
    h("section", { class: "card" }, h("h2", {}, "Diff"), h("pre", { id: "diff" }, r.diff || "(no change)")),
  ));
}
