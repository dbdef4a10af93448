// Unit tests of the "written" follow-up of inline completions: src/core/written.ts (following
// a completion's place through document changes, with fake timers) and
// src/core/completionFeedback.ts (what the editor reports for each server reply: an empty
// one shows nothing; rejected / partially accepted ones are followed up as written).

import assert from "node:assert/strict";
import { test } from "node:test";
import { CompletionFeedback, type FeedbackExtra } from "../../src/core/completionFeedback";
import type { DocumentChange } from "../../src/core/completions";
import { MAX_WRITTEN_CHARS, WrittenTracker, applyChange } from "../../src/core/written";
import type { CompletionOutcome } from "../../src/protocol/vocab";
import { FakeTimers } from "./helpers";

const DOC = "file:///w/a.py";
const OTHER = "file:///w/b.py";
const SETTLE = 1000;

const ins = (offset: number, insertedText: string): DocumentChange => ({ offset, removedLength: 0, insertedText });
const del = (offset: number, removedLength: number, insertedText = ""): DocumentChange => ({ offset, removedLength, insertedText });

/** A CompletionFeedback with fake timers; `reports` is everything it asked to send. */
function feedback(maxFollowed?: number) {
  const timers = new FakeTimers();
  const reports: Array<[string, CompletionOutcome, FeedbackExtra]> = [];
  const f = new CompletionFeedback((id, outcome, extra) => reports.push([id, outcome, { ...extra }]), { settleMs: SETTLE, timers, maxFollowed });
  const type = (offset: number, text: string, uri = DOC) => {
    // One keystroke per event, as a person types.
    for (let i = 0; i < text.length; i++) f.onDocumentChange(uri, [ins(offset + i, text[i])]);
  };
  const written = () => reports.filter((r) => r[1] === "written");
  return { f, timers, reports, type, written };
}

test("an empty suggestion shows nothing and reports nothing, not even shown", () => {
  const { f, timers, reports, type } = feedback();
  assert.equal(f.offer({ suggestion_id: "c0", text: "" }, DOC, 10), undefined);
  type(10, "x = 1");
  f.dismiss();
  timers.advance(SETTLE * 5);
  assert.deepEqual(reports, []);
  assert.deepEqual(f.written.followed, []);
});

test("rejected by typing other text: written with that text after the settle time", () => {
  const { f, timers, reports, type } = feedback();
  assert.equal(f.offer({ suggestion_id: "c1", text: "0" }, DOC, 10), "0");
  type(10, "a + b");
  assert.deepEqual(reports.map((r) => r[1]), ["shown", "rejected"]);
  timers.advance(SETTLE - 1);
  assert.equal(reports.length, 2, "nothing before the settle time");
  timers.advance(1);
  assert.deepEqual(reports[2], ["c1", "written", { finalText: "a + b" }]);
  timers.advance(SETTLE * 5);
  assert.equal(reports.length, 3, "one written follow-up at most");
});

test("the settle time counts from the rejection; typing after it is not in final_text", () => {
  const { f, timers, written, type } = feedback();
  f.offer({ suggestion_id: "c1", text: "foo()" }, DOC, 0);
  timers.advance(5000); // on screen a while before anything happens
  type(0, "bar");
  timers.advance(SETTLE);
  type(3, "(x)");
  assert.deepEqual(written(), [["c1", "written", { finalText: "bar" }]]);
});

test("dismissed and nothing typed at the place: written with an empty final_text", () => {
  const { f, timers, written } = feedback();
  f.offer({ suggestion_id: "c1", text: "return 1" }, DOC, 10);
  f.dismiss();
  timers.advance(SETTLE);
  assert.deepEqual(written(), [["c1", "written", { finalText: "" }]]);
});

test("typing before the place shifts it; typing after it or in another document is ignored", () => {
  const { f, timers, written, type } = feedback();
  f.offer({ suggestion_id: "c1", text: "0" }, DOC, 10);
  type(10, "ab"); // rejected; the place holds "ab" at 10..12
  type(0, "# x\n"); // before: the place moves to 14..16
  f.onDocumentChange(DOC, [ins(20, "tail")]); // after it
  f.onDocumentChange(DOC, [del(17, 2)]); // a deletion after it
  f.onDocumentChange(OTHER, [del(0, 5), ins(0, "zzz")]); // elsewhere
  type(16, "c"); // at its end: extends it
  timers.advance(SETTLE);
  assert.deepEqual(written(), [["c1", "written", { finalText: "abc" }]]);
});

test("edits inside the place (backspace, replace) are followed", () => {
  const { f, timers, written, type } = feedback();
  f.offer({ suggestion_id: "c1", text: "0" }, DOC, 5);
  type(5, "a - b");
  f.onDocumentChange(DOC, [del(9, 1)]); // backspace over "b"
  f.onDocumentChange(DOC, [del(7, 1, "+")]); // "-" replaced by "+"
  type(9, "c");
  timers.advance(SETTLE);
  assert.deepEqual(written(), [["c1", "written", { finalText: "a + c" }]]);
});

test("a deletion wholly before the place moves it", () => {
  const { f, timers, written, type } = feedback();
  f.offer({ suggestion_id: "c1", text: "0" }, DOC, 10);
  type(10, "ab");
  f.onDocumentChange(DOC, [del(3, 2, "x")]); // a line above edited: the place is at 9 now
  type(11, "more");
  timers.advance(SETTLE);
  assert.deepEqual(written(), [["c1", "written", { finalText: "abmore" }]]);
});

test("a deletion up to the place's start, or across it, reports nothing", () => {
  for (const change of [del(9, 1), del(8, 4, "xy"), del(0, 10, "")]) {
    const { f, timers, reports, type } = feedback();
    f.offer({ suggestion_id: "c1", text: "0" }, DOC, 10);
    type(10, "ab");
    f.onDocumentChange(DOC, [change]);
    type(10, "more");
    timers.advance(SETTLE);
    assert.deepEqual(reports.map((r) => r[1]), ["shown", "rejected"], JSON.stringify(change));
  }
});

test("partially accepted: final_text is the taken prefix plus what was typed after it", () => {
  const { f, timers, reports, written, type } = feedback();
  f.offer({ suggestion_id: "c1", text: "foo(bar)" }, DOC, 10);
  f.onDocumentChange(DOC, [ins(10, "foo")]); // accept next word
  type(13, " = 1"); // then the person writes on
  assert.deepEqual(reports[1], ["c1", "partially_accepted", { acceptedLength: 3 }]);
  timers.advance(SETTLE);
  assert.deepEqual(written(), [["c1", "written", { finalText: "foo = 1" }]]);
});

test("accepted (by the text or by the command): no written follow-up", () => {
  const { f, timers, reports } = feedback();
  f.offer({ suggestion_id: "c1", text: "foo" }, DOC, 10);
  f.onDocumentChange(DOC, [ins(10, "foo")]);
  f.offer({ suggestion_id: "c2", text: "bar" }, DOC, 13);
  f.acceptedByCommand("c2", 3);
  f.onDocumentChange(DOC, [ins(13, "bar")]); // the command's insertion, seen after it
  timers.advance(SETTLE * 2);
  assert.deepEqual(reports, [
    ["c1", "shown", {}],
    ["c1", "accepted", { acceptedLength: 3 }],
    ["c2", "shown", {}],
    ["c2", "accepted", { acceptedLength: 3 }],
  ]);
});

test("a newer completion does not cancel an older one's follow-up: each place on its own", () => {
  const { f, timers, written, type } = feedback();
  f.offer({ suggestion_id: "c1", text: "0" }, DOC, 10);
  type(10, "a");
  f.offer({ suggestion_id: "c2", text: "b" }, DOC, 11); // shown at the cursor after "a"
  type(11, " + b");
  f.offer({ suggestion_id: "c3", text: "  # sum" }, DOC, 15);
  f.dismiss();
  timers.advance(SETTLE);
  assert.deepEqual(written().sort(), [
    ["c1", "written", { finalText: "a + b" }],
    ["c2", "written", { finalText: " + b" }],
    ["c3", "written", { finalText: "" }],
  ]);
});

test("a closed document or dispose: nothing is reported", () => {
  const closed = feedback();
  closed.f.offer({ suggestion_id: "c1", text: "0" }, DOC, 10);
  closed.f.offer({ suggestion_id: "c2", text: "0" }, OTHER, 10);
  closed.type(10, "a");
  closed.type(10, "b", OTHER);
  closed.f.documentClosed(DOC);
  closed.timers.advance(SETTLE);
  assert.deepEqual(closed.written(), [["c2", "written", { finalText: "b" }]]);

  const disposed = feedback();
  disposed.f.offer({ suggestion_id: "c1", text: "0" }, DOC, 10);
  disposed.type(10, "a");
  disposed.f.dispose();
  assert.equal(disposed.timers.pending, 0);
  disposed.timers.advance(SETTLE);
  assert.deepEqual(disposed.written(), []);
  disposed.f.offer({ suggestion_id: "c9", text: "0" }, DOC, 10);
  assert.deepEqual(disposed.f.written.followed, [], "a disposed tracker follows nothing");
});

test("at most maxFollowed places at once: the oldest is dropped", () => {
  const { f, timers, written } = feedback(2);
  for (const id of ["c1", "c2", "c3"]) f.offer({ suggestion_id: id, text: "x" }, DOC, 10);
  assert.deepEqual(f.written.followed, ["c2", "c3"]);
  f.dismiss();
  timers.advance(SETTLE);
  assert.deepEqual(written().map((r) => r[0]).sort(), ["c2", "c3"], "c1 was dropped (c2 rejected by c3, c3 dismissed)");
});

test("the same suggestion shown again is followed once", () => {
  const timers = new FakeTimers();
  const reports: Array<[string, string]> = [];
  const t = new WrittenTracker({ report: (id, text) => reports.push([id, text]), settleMs: 10, timers });
  t.follow({ suggestionId: "c1", documentUri: DOC, offset: 0 });
  t.onDocumentChange(DOC, [ins(0, "x")]);
  t.follow({ suggestionId: "c1", documentUri: DOC, offset: 1 }); // shown again: keeps its place
  t.notTaken("c1");
  t.notTaken("c1");
  timers.advance(10);
  t.follow({ suggestionId: "c1", documentUri: DOC, offset: 0 });
  t.notTaken("c1");
  timers.advance(10);
  assert.deepEqual(reports, [["c1", "x"]]);
});

test("settleMs may be a function, asked when the follow-up starts", () => {
  const timers = new FakeTimers();
  let settle = 100;
  const reports: string[] = [];
  const t = new WrittenTracker({ report: (id) => reports.push(id), settleMs: () => settle, timers });
  t.follow({ suggestionId: "c1", documentUri: DOC, offset: 0 });
  settle = 500;
  t.notTaken("c1");
  timers.advance(499);
  assert.deepEqual(reports, []);
  timers.advance(1);
  assert.deepEqual(reports, ["c1"]);
});

test("applyChange: several changes of one event in order; a huge paste is not followed", () => {
  const place = { start: 10, text: "" };
  assert.ok(applyChange(place, ins(2, "ab"))); // before
  assert.ok(applyChange(place, ins(12, "xyz"))); // at it
  assert.ok(applyChange(place, del(13, 5, "Y"))); // from inside past its end
  assert.deepEqual(place, { start: 12, text: "xY" });
  assert.equal(applyChange(place, ins(12, "z".repeat(MAX_WRITTEN_CHARS))), false);
});
