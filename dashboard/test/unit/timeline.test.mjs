// Unit tests of the overview's axis and series (src/timeline.ts, compiled by `npm test` into
// build/unit/): range -> ticks and labels, bucket filling, one series per adapter.
// Run: cd dashboard && npm test   (pytest runs it too: tests/dashboard/test_dashboard_unit.py)
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  DAY, HOUR, RANGES, adapterName, adapterSeries, bucketStarts, isEmpty, outcomeCounts, pointRadii,
  rateText, ticks,
} from "../../build/unit/timeline.js";

const NOW = Date.UTC(2026, 11, 7, 14, 23, 11); // 2026-12-07 14:23:11 UTC, a Monday

function rangeOf(days) {
  return { since: NOW - days * DAY, until: NOW };
}

test("every range's ticks lie inside it, ascending, at most ten, labelled distinctly", () => {
  for (const [name, days] of RANGES) {
    const { since, until } = rangeOf(days);
    const found = ticks(since, until);
    assert.ok(found.length >= 3 && found.length <= 10, `${name}: ${found.length} ticks`);
    for (const [i, t] of found.entries()) {
      assert.ok(t.value >= since && t.value <= until, `${name}: ${t.label} outside the range`);
      if (i) assert.ok(t.value > found[i - 1].value, `${name}: not ascending`);
    }
    const labels = found.map((t) => t.label);
    assert.equal(new Set(labels).size, labels.length, `${name}: repeated labels ${labels}`);
    assert.ok(!labels.some((l) => l.includes("01-01") || l.includes("1970")), `${name}: ${labels}`);
  }
});

test("a day is labelled in hours, with the date at midnight", () => {
  const { since, until } = rangeOf(1);
  const found = ticks(since, until);
  assert.deepEqual(found.map((t) => t.label),
    ["15:00", "18:00", "21:00", "Dec 7", "03:00", "06:00", "09:00", "12:00"]);
  assert.equal(found[0].value, Date.UTC(2026, 11, 6, 15));
  assert.equal(found[3].value, Date.UTC(2026, 11, 7));
});

test("weeks and months are labelled with dates, a year with months", () => {
  const week = ticks(NOW - 7 * DAY, NOW).map((t) => t.label);
  assert.deepEqual(week, ["Dec 1", "Dec 2", "Dec 3", "Dec 4", "Dec 5", "Dec 6", "Dec 7"]);
  const month = ticks(NOW - 30 * DAY, NOW);
  assert.deepEqual(month.map((t) => t.label), ["Nov 9", "Nov 16", "Nov 23", "Nov 30", "Dec 7"]);
  for (const t of month) assert.equal(new Date(t.value).getUTCDay(), 1, "weekly ticks on Mondays");
  const quarter = ticks(NOW - 90 * DAY, NOW).map((t) => t.label);
  assert.ok(quarter.every((l) => /^[A-Z][a-z]{2} \d{1,2}$/.test(l)), quarter.join());
  const year = ticks(NOW - 365 * DAY, NOW).map((t) => t.label);
  assert.deepEqual(year, ["Jan 2026", "Mar", "May", "Jul", "Sep", "Nov"]);
  const newYear = ticks(Date.UTC(2026, 5, 1), Date.UTC(2027, 4, 1)).map((t) => t.label);
  assert.ok(newYear.includes("Jan 2027"), newYear.join());
});

test("an empty or reversed range has no ticks", () => {
  assert.deepEqual(ticks(NOW, NOW), []);
  assert.deepEqual(ticks(NOW, NOW - HOUR), []);
});

test("buckets are aligned as the server aligns them and cover the range", () => {
  const { since, until } = rangeOf(1);
  const starts = bucketStarts(since, until, HOUR);
  assert.equal(starts.length, 25); // the partial hours at both ends count
  assert.equal(starts[0], Date.UTC(2026, 11, 6, 14));
  assert.equal(starts.at(-1), Date.UTC(2026, 11, 7, 14));
  assert.ok(starts.every((t) => t % HOUR === 0));
  assert.equal(bucketStarts(NOW - 30 * DAY, NOW, DAY).length, 31);
  assert.deepEqual(bucketStarts(NOW, NOW, DAY), []);
  // The hour now running ends after `until`: its point is the middle of its part so far.
  const counts = [{ t: Date.UTC(2026, 11, 7, 14), adapter_version: null, k: 1, n: 1 }];
  const last = adapterSeries(counts, since, until, HOUR)[0].points.at(-1).x;
  assert.equal(last, (Date.UTC(2026, 11, 7, 14) + until) / 2);
});

test("each adapter gets its own series over every bucket, gaps as null", () => {
  const { since, until } = rangeOf(30);
  const today = Date.UTC(2026, 11, 7);
  const counts = [
    { t: today, adapter_version: 1, k: 3, n: 6 },
    { t: today, adapter_version: null, k: 3, n: 6 }, // same bucket, same rate: still two series
    { t: today - 2 * DAY, adapter_version: null, k: 1, n: 4 },
    { t: today - 2 * DAY, adapter_version: 0, k: 1, n: 4 }, // version 0 is the base model too
    { t: today, adapter_version: 10, k: 0, n: 0 }, // nothing counted: no series
    { t: today - 400 * DAY, adapter_version: 2, k: 1, n: 1 }, // outside the range: left out
  ];
  const series = adapterSeries(counts, since, until, DAY);
  assert.deepEqual(series.map((s) => s.label), ["base", "policy-v1"]);
  assert.deepEqual(series.map((s) => s.order), [0, 1]);
  for (const s of series) {
    assert.equal(s.points.length, 31);
    assert.ok(s.points.every((p) => p.x >= since && p.x <= until), "points inside the axis");
    assert.ok(s.points.every((p, i) => !i || p.x > s.points[i - 1].x), "one point per bucket");
  }
  const [base, v1] = series;
  // Today so far: the middle of [midnight, now].
  assert.deepEqual(base.points.at(-1), { x: (today + until) / 2, y: 0.5, k: 3, n: 6 });
  assert.equal(base.points.at(-3).y, 0.25); // two rows of one bucket summed: 2 of 8
  assert.equal(base.points.at(-3).n, 8);
  assert.equal(base.points.at(-3).x, today - 2 * DAY + DAY / 2);
  assert.equal(base.points.filter((p) => p.y !== null).length, 2);
  assert.equal(v1.points.filter((p) => p.y !== null).length, 1);
  assert.equal(v1.points[0].y, null);
  // The first bucket starts before the range: its point is in the middle of the part inside.
  assert.equal(v1.points[0].x, (since + Date.UTC(2026, 10, 8)) / 2);
});

test("versions sort by number, not by name", () => {
  const counts = [10, 2, null].map((v) => ({ t: NOW, adapter_version: v, k: 1, n: 2 }));
  const labels = adapterSeries(counts, NOW - DAY, NOW + HOUR, HOUR).map((s) => s.label);
  assert.deepEqual(labels, ["base", "policy-v2", "policy-v10"]);
});

test("a lone point is drawn; a chart with no point is empty", () => {
  const { since, until } = rangeOf(90);
  const one = adapterSeries([{ t: NOW - 40 * DAY, adapter_version: 3, k: 1, n: 1 }], since, until, DAY);
  assert.equal(one.length, 1);
  const radii = pointRadii(one[0].points);
  assert.equal(radii.filter((r) => r > 0).length, 1);
  assert.ok(radii[one[0].points.findIndex((p) => p.y !== null)] >= 3, "big enough to see");
  assert.ok(!isEmpty(one));
  assert.ok(isEmpty([]));
  assert.ok(isEmpty(adapterSeries([], since, until, DAY)));
  const dense = Array.from({ length: 90 }, (_, i) => ({ x: i, y: 0.5, k: 1, n: 2 }));
  assert.ok(pointRadii(dense).every((r) => r === 0), "many points: the line alone");
});

test("edit outcomes become k of n: accepted or partly, of those decided; written is neither", () => {
  const t = new Date(NOW).toISOString();
  const rows = [
    { t, adapter_version: null, suggestion: "edit", kind: "accepted", n: 2 },
    { t, adapter_version: null, suggestion: "edit", kind: "partially_accepted", n: 1 },
    { t, adapter_version: null, suggestion: "edit", kind: "rejected", n: 3 },
    { t, adapter_version: null, suggestion: "edit", kind: "written", n: 5 },
    { t, adapter_version: null, suggestion: "completion", kind: "accepted", n: 7 },
  ];
  const counts = outcomeCounts(rows, "edit", ["accepted", "partially_accepted"], ["rejected"]);
  const series = adapterSeries(counts, NOW - DAY, NOW + HOUR, HOUR);
  const point = series[0].points.find((p) => p.y !== null);
  assert.deepEqual([point.k, point.n], [3, 6]);
});

test("names and rates read as on the page", () => {
  assert.equal(adapterName(null), "base");
  assert.equal(adapterName(0), "base");
  assert.equal(adapterName(3), "policy-v3");
  assert.equal(rateText({ value: 0.625, low: 0.3057, high: 0.8632 }), "62.5% (30.6–86.3%)");
  assert.equal(rateText({ value: null, low: null, high: null }), "—");
});
