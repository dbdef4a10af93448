// Overview: per adapter version, the share of completion requests shown and the acceptance of
// those shown (with 95 % intervals the server computes); over time, completions (accepted /
// shown, shown / requested) and agent edits ((accepted + partly) / decided), one series per
// adapter on an axis spanning the chosen range, deployments marked; the counts and follow-up
// rates per adapter; by time range, language and user.
import { api, type CompletionStats, type Deployment, type OutcomeCount, type OutcomeSeries } from "../api";
import { timeChart } from "../charts";
import { adapterName, h, percent, table } from "../dom";
import { adapterSeries, outcomeCounts, RANGES, rateText, type BucketCount } from "../timeline";

const KINDS = ["shown", "accepted", "rejected", "partially_accepted", "persisted",
               "edited_after_accept", "reverted", "written"];

let state = { range: 2, language: "", user: "" };

function ratesTable(stats: CompletionStats): HTMLElement {
  if (!stats.adapters.length) {
    return h("p", { id: "no-completions", class: "muted" }, "No completion requests in this range.");
  }
  const rows = stats.adapters.map((a) => [adapterName(a.adapter_version), a.requests, a.shown,
    rateText(a.shown_share), a.accepted, rateText(a.acceptance)]);
  return table(["adapter", "requests", "shown", "share shown (95% CI)", "accepted",
                "acceptance of shown (95% CI)"], rows, "completion-rates");
}

function countsTable(rows: OutcomeCount[]): HTMLElement {
  const totals = new Map<string, Record<string, number>>();
  for (const row of rows) {
    const key = `${adapterName(row.adapter_version)} ${row.suggestion}`;
    const counts = totals.get(key) ?? {};
    totals.set(key, counts);
    counts[row.kind] = (counts[row.kind] ?? 0) + row.n;
  }
  const body = [...totals].sort().map(([key, c]) => {
    const took = (c.accepted ?? 0) + (c.partially_accepted ?? 0);
    const edit = key.endsWith(" edit");
    const rate = edit ? percent(took, took + (c.rejected ?? 0)) : percent(c.accepted ?? 0, c.shown ?? 0);
    return [key, ...KINDS.map((k) => c[k] ?? 0), rate, percent(c.persisted ?? 0, took),
            percent(c.edited_after_accept ?? 0, took), percent(c.reverted ?? 0, took)];
  });
  // Kinds as words ("partially accepted"), so the headers wrap and the table fits its card.
  return h("div", { class: "scroll" },
    table(["adapter / kind", ...KINDS.map((k) => k.replaceAll("_", " ")), "acceptance", "persisted",
           "edited after", "reverted"], body, "counts"));
}

function utcRange(since: number, until: number): string {
  const text = (ms: number): string => new Date(ms).toISOString().slice(0, 16).replace("T", " ");
  return `${text(since)} – ${text(until)} UTC`;
}

export async function renderOverview(app: HTMLElement): Promise<void> {
  const [label, days, bucket] = RANGES[state.range];
  const now = new Date();
  const query = new URLSearchParams({ since: new Date(now.getTime() - days * 86400_000).toISOString(),
                                      until: now.toISOString(), bucket_s: String(bucket) });
  if (state.language) query.set("language", state.language);
  if (state.user) query.set("user", state.user);
  const [series, completions, deployments] = await Promise.all([
    api<OutcomeSeries>(`/v1/admin/stats/outcomes?${query}`),
    api<CompletionStats>(`/v1/admin/stats/completions?${query}`),
    api<Deployment[]>("/v1/admin/deployments?limit=500"),
  ]);
  const since = Date.parse(series.since);
  const until = Date.parse(series.until);
  const bucketMs = series.bucket_s * 1000;
  const rangeSelect = h("select", { id: "range", onchange: (e) => {
    state = { ...state, range: Number((e.target as HTMLSelectElement).value) };
    void renderOverview(app);
  } }, ...RANGES.map(([text], i) => h("option", { value: String(i), selected: i === state.range }, text)));
  const languageSelect = h("select", { id: "language", onchange: (e) => {
    state = { ...state, language: (e.target as HTMLSelectElement).value };
    void renderOverview(app);
  } }, h("option", { value: "" }, "all languages"),
     ...series.languages.map((l) => h("option", { value: l, selected: l === state.language }, l)));
  const userSelect = h("select", { id: "user", onchange: (e) => {
    state = { ...state, user: (e.target as HTMLSelectElement).value };
    void renderOverview(app);
  } }, h("option", { value: "" }, "everyone"),
     ...series.users.map((u) => h("option", { value: u, selected: u === state.user }, u)));
  const marks = deployments
    .filter((d) => d.status !== "failed")
    .map((d) => ({ x: Date.parse(d.created_at), label: adapterName(d.adapter_version) }));
  const boxes = { accepted: h("div", { class: "chart" }), shown: h("div", { class: "chart" }),
                  edits: h("div", { class: "chart" }) };
  const card = (title: string, ...body: (HTMLElement | string)[]) =>
    h("section", { class: "card" }, h("h2", {}, title), ...body);
  app.replaceChildren(
    h("h1", {}, "Overview"),
    h("div", { class: "filters" }, h("label", {}, "Range ", rangeSelect),
      h("label", {}, "Language ", languageSelect),
      h("label", {}, "User ", userSelect),
      h("span", { id: "range-text", class: "muted" },
        `${label}: ${utcRange(since, until)}, ${series.rows.reduce((n, r) => n + r.n, 0)} outcomes`)),
    card("Inline completions per adapter", ratesTable(completions),
      h("p", { class: "muted note" }, "Share shown: requests the editor showed (an empty answer " +
        "is never shown). Acceptance: of those shown, the ones whose latest decision was " +
        "accepted, partially accepted, persisted or edited after accept; what the person " +
        "wrote instead (`written`) is no decision. Intervals: 95% Wilson score.")),
    card("Completions: accepted / shown, per adapter (by request time)", boxes.accepted),
    card("Completions: shown / requested, per adapter (by request time)", boxes.shown),
    card("Agent edits: accepted (or partly) / decided, per adapter", boxes.edits),
    card("Counts and follow-ups", countsTable(series.rows)),
  );
  const counts = (k: "accepted" | "shown", n: "shown" | "requests"): BucketCount[] =>
    completions.buckets.map((b) => ({ t: Date.parse(b.t), adapter_version: b.adapter_version,
                                      k: b[k], n: b[n] }));
  const chart = { since, until, percent: true, markers: marks };
  timeChart(boxes.accepted, "chart-completions", adapterSeries(counts("accepted", "shown"), since, until, bucketMs),
            { ...chart, empty: "No shown completions in this range: nothing to chart." });
  timeChart(boxes.shown, "chart-shown", adapterSeries(counts("shown", "requests"), since, until, bucketMs),
            { ...chart, empty: "No completion requests in this range: nothing to chart." });
  const edits = outcomeCounts(series.rows, "edit", ["accepted", "partially_accepted"], ["rejected"]);
  timeChart(boxes.edits, "chart-edits", adapterSeries(edits, since, until, bucketMs),
            { ...chart, empty: "No agent edits decided in this range: nothing to chart." });
}
