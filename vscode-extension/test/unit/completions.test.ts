// Unit tests of src/core/completions.ts: classifying what happened to inline completions
// from the document changes that follow them.

import assert from "node:assert/strict";
import { test } from "node:test";
import { CompletionTracker, isBoundary } from "../../src/core/completions";
import type { CompletionOutcome } from "../../src/protocol/vocab";

function tracker() {
  const reports: Array<[string, CompletionOutcome, Record<string, unknown>]> = [];
  const t = new CompletionTracker((id, outcome, extra) => reports.push([id, outcome, { ...extra }]));
  return { t, reports };
}

const DOC = "file:///w/a.py";
const shown = { suggestionId: "c1", documentUri: DOC, offset: 10, text: "foo(bar)\nbaz" };

test("shown is reported; the whole text inserted at the offset is accepted", () => {
  const { t, reports } = tracker();
  t.shown(shown);
  t.onDocumentChange(DOC, [{ offset: 10, removedLength: 0, insertedText: "foo(bar)\nbaz" }]);
  assert.deepEqual(reports, [
    ["c1", "shown", {}],
    ["c1", "accepted", { acceptedLength: 12 }],
  ]);
  assert.equal(t.active, undefined);
});

test("word-by-word acceptance continues, then settles as partially_accepted on an unrelated change", () => {
  const { t, reports } = tracker();
  t.shown(shown);
  t.onDocumentChange(DOC, [{ offset: 10, removedLength: 0, insertedText: "foo" }]);
  t.onDocumentChange(DOC, [{ offset: 13, removedLength: 0, insertedText: "(bar)" }]);
  assert.deepEqual(reports.map((r) => r[1]), ["shown"], "still waiting for more words");
  t.onDocumentChange(DOC, [{ offset: 0, removedLength: 1, insertedText: "" }]);
  assert.deepEqual(reports[1], ["c1", "partially_accepted", { acceptedLength: 8 }]);
});

test("accepting word by word up to the end is accepted", () => {
  const { t, reports } = tracker();
  t.shown(shown);
  t.onDocumentChange(DOC, [{ offset: 10, removedLength: 0, insertedText: "foo(bar)\n" }]);
  t.onDocumentChange(DOC, [{ offset: 19, removedLength: 0, insertedText: "baz" }]);
  assert.deepEqual(reports[1], ["c1", "accepted", { acceptedLength: 12 }]);
});

test("a prefix that ends mid-word, other text, or another place is rejected as dismissed", () => {
  for (const change of [
    { offset: 10, removedLength: 0, insertedText: "fo" },
    { offset: 10, removedLength: 0, insertedText: "bar" },
    { offset: 11, removedLength: 0, insertedText: "foo" },
    { offset: 10, removedLength: 2, insertedText: "foo" },
  ]) {
    const { t, reports } = tracker();
    t.shown(shown);
    t.onDocumentChange(DOC, [change]);
    assert.deepEqual(reports[1], ["c1", "rejected", { reason: "dismissed" }], JSON.stringify(change));
  }
});

test("changes to other documents are ignored; dismiss and a newer shown settle the old one", () => {
  const { t, reports } = tracker();
  t.shown(shown);
  t.onDocumentChange("file:///w/other.py", [{ offset: 0, removedLength: 0, insertedText: "zzz" }]);
  assert.equal(reports.length, 1);
  t.shown({ ...shown, suggestionId: "c2" });
  t.onDocumentChange(DOC, [{ offset: 10, removedLength: 0, insertedText: "foo" }]);
  t.dismiss();
  t.dismiss(); // nothing left to settle
  assert.deepEqual(reports, [
    ["c1", "shown", {}],
    ["c1", "rejected", { reason: "dismissed" }],
    ["c2", "shown", {}],
    ["c2", "partially_accepted", { acceptedLength: 3 }],
  ]);
});

test("the same suggestion shown again is not reported twice", () => {
  const { t, reports } = tracker();
  t.shown(shown);
  t.shown(shown);
  assert.equal(reports.length, 1);
});

test("isBoundary: word/punctuation/space/line transitions", () => {
  assert.equal(isBoundary("foo(bar)", 3), true);
  assert.equal(isBoundary("foo(bar)", 2), false);
  assert.equal(isBoundary("a b", 1), true);
  assert.equal(isBoundary("ab\ncd", 3), true);
  assert.equal(isBoundary("ab", 2), true);
  assert.equal(isBoundary("ab", 0), false);
  assert.equal(isBoundary("été x", 3), true);
  assert.equal(isBoundary("été", 1), false);
});
