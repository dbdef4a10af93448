// Overview: acceptance over time per adapter version (completions and agent edits apart), the
// counts and follow-up rates per adapter, by language and time range; deployments are marked
// on the time axis so a person sees what each adapter changed.
import { api, type Deployment, type OutcomeCount, type OutcomeSeries } from "../api";
import { lineChart, type Series } from "../charts";
import { adapterName, h, percent, table } from "../dom";

const RANGES: [string, number, number][] = [
  // label, days, bucket seconds
  ["24 hours", 1, 3600],
  ["7 days", 7, 6 * 3600],
  ["30 days", 30, 86400],
  ["90 days", 90, 86400],
  ["1 year", 365, 7 * 86400],
];
const KINDS = ["shown", "accepted", "rejected", "partially_accepted", "persisted",
               "edited_after_accept", "reverted"];

let state = { range: 2, language: "", user: "" };

/** Accepted share per bucket: completions accepted / shown; edits (accepted + partial) / decided. */
function acceptance(rows: OutcomeCount[], suggestion: string): Series[] {
  const byAdapter = new Map<string, Map<number, Record<string, number>>>();
  for (const row of rows) {
    if (row.suggestion !== suggestion) continue;
    const name = adapterName(row.adapter_version);
    const buckets = byAdapter.get(name) ?? new Map();
    byAdapter.set(name, buckets);
    const t = Date.parse(row.t);
    const counts = buckets.get(t) ?? {};
    buckets.set(t, counts);
    counts[row.kind] = (counts[row.kind] ?? 0) + row.n;
  }
  const series: Series[] = [];
  for (const [label, buckets] of [...byAdapter].sort()) {
    const points = [];
    for (const [x, c] of [...buckets].sort((a, b) => a[0] - b[0])) {
      const took = (c.accepted ?? 0) + (suggestion === "edit" ? c.partially_accepted ?? 0 : 0);
      const whole = suggestion === "edit" ? took + (c.rejected ?? 0) : c.shown ?? 0;
      if (whole > 0) points.push({ x, y: Math.min(1, took / whole) });
    }
    if (points.length) series.push({ label, points });
  }
  return series;
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
  return table(["adapter / kind", ...KINDS, "acceptance", "persisted", "edited after", "reverted"],
               body, "counts");
}

export async function renderOverview(app: HTMLElement): Promise<void> {
  const [label, days, bucket] = RANGES[state.range];
  const until = new Date();
  const since = new Date(until.getTime() - days * 86400_000);
  const query = new URLSearchParams({ since: since.toISOString(), until: until.toISOString(),
                                      bucket_s: String(bucket) });
  if (state.language) query.set("language", state.language);
  if (state.user) query.set("user", state.user);
  const [series, deployments] = await Promise.all([
    api<OutcomeSeries>(`/v1/admin/stats/outcomes?${query}`),
    api<Deployment[]>("/v1/admin/deployments?limit=500"),
  ]);
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
  const completions = h("canvas", { id: "chart-completions" });
  const edits = h("canvas", { id: "chart-edits" });
  app.replaceChildren(
    h("h1", {}, "Overview"),
    h("div", { class: "filters" }, h("label", {}, "Range ", rangeSelect),
      h("label", {}, "Language ", languageSelect),
      h("label", {}, "User ", userSelect),
      h("span", { class: "muted" }, `${label}, ${series.rows.reduce((n, r) => n + r.n, 0)} outcomes`)),
    h("section", { class: "card" }, h("h2", {}, "Completions: accepted / shown, per adapter"),
      h("div", { class: "chart" }, completions)),
    h("section", { class: "card" }, h("h2", {}, "Agent edits: accepted (or partly) / decided, per adapter"),
      h("div", { class: "chart" }, edits)),
    h("section", { class: "card" }, h("h2", {}, "Counts and follow-ups"), countsTable(series.rows)),
  );
  lineChart(completions, acceptance(series.rows, "completion"), { time: true, percent: true, markers: marks });
  lineChart(edits, acceptance(series.rows, "edit"), { time: true, percent: true, markers: marks });
}
