// Unit tests of src/core/outcomes.ts with fake timers: persisted, reverted, deleted,
// edited_after_accept, expectWrite/noteWritten linking, report failures, dispose, and the
// written follow-up of rejected edits (trackRejected).

import assert from "node:assert/strict";
import { test } from "node:test";
import { OutcomeTracker } from "../../src/core/outcomes";
import type { FollowUpKind } from "../../src/protocol/vocab";
import { FakeTimers } from "./helpers";

function setup(files: Map<string, string>, settleMs = 1000) {
  const timers = new FakeTimers();
  const reports: Array<{ id: string; kind: FollowUpKind; finalText?: string }> = [];
  const tracker = new OutcomeTracker({
    readText: async (p) => files.get(p),
    report: async (id, kind, extra) => {
      reports.push({ id, kind, ...extra });
      return { acked: id };
    },
    settleMs,
    timers,
  });
  return { timers, reports, tracker };
}

const edit = { suggestionId: "s1", path: "a.py", beforeText: "x = 1\n", acceptedText: "x = 2\n" };

test("nothing is reported before settleMs; unchanged text is persisted", async () => {
  const files = new Map([["a.py", "x = 2\n"]]);
  const { timers, reports, tracker } = setup(files);
  const done = tracker.track(edit);
  timers.advance(999);
  await Promise.resolve();
  assert.deepEqual(reports, []);
  timers.advance(1);
  const result = await done;
  assert.deepEqual(reports, [{ id: "s1", kind: "persisted" }]);
  assert.deepEqual(result, { kind: "persisted", reported: { acked: "s1" } });
});

test("the text before the edit is reverted; a deleted file is reverted", async () => {
  const files = new Map([["a.py", "x = 1\n"]]);
  const { timers, reports, tracker } = setup(files);
  const first = tracker.track(edit);
  const second = tracker.track({ ...edit, suggestionId: "s2", path: "gone.py" });
  timers.advance(1000);
  await Promise.all([first, second]);
  assert.deepEqual(reports.sort((a, b) => a.id.localeCompare(b.id)), [
    { id: "s1", kind: "reverted" },
    { id: "s2", kind: "reverted" },
  ]);
});

test("any other text is edited_after_accept with the final text", async () => {
  const files = new Map([["a.py", "x = 3  # tuned\n"]]);
  const { timers, reports, tracker } = setup(files);
  const done = tracker.track(edit);
  timers.advance(1000);
  assert.equal((await done)?.kind, "edited_after_accept");
  assert.deepEqual(reports, [{ id: "s1", kind: "edited_after_accept", finalText: "x = 3  # tuned\n" }]);
});

test("a created file (no text before) that is emptied is edited, not reverted", async () => {
  const files = new Map([["new.py", ""]]);
  const { timers, reports, tracker } = setup(files);
  const done = tracker.track({ suggestionId: "s3", path: "new.py", beforeText: undefined, acceptedText: "print(1)\n" });
  timers.advance(1000);
  await done;
  assert.deepEqual(reports, [{ id: "s3", kind: "edited_after_accept", finalText: "" }]);
});

test("expectWrite + noteWritten start tracking with the written text; other writes do not", async () => {
  const files = new Map([["a.py", "x = 2\n"]]);
  const { timers, reports, tracker } = setup(files);
  tracker.expectWrite({ suggestionId: "s1", path: "a.py", beforeText: "x = 1\n" });
  assert.equal(tracker.noteWritten("b.py", "unrelated"), undefined);
  const followUp = tracker.noteWritten("./a.py", "x = 2\n");
  assert.ok(followUp, "the accepted write is tracked");
  assert.equal(tracker.followUpOf("s1"), followUp);
  assert.equal(tracker.noteWritten("a.py", "x = 9\n"), undefined, "only the first write after the accept");
  timers.advance(1000);
  await followUp;
  assert.deepEqual(reports, [{ id: "s1", kind: "persisted" }]);
});

test("an expectation without a write is forgotten after expectWriteMs", () => {
  const timers = new FakeTimers();
  const tracker = new OutcomeTracker({ readText: async () => "", report: () => undefined, expectWriteMs: 500, timers });
  tracker.expectWrite({ suggestionId: "s1", path: "a.py", beforeText: "" });
  timers.advance(500);
  assert.equal(tracker.noteWritten("a.py", "late"), undefined);
});

test("a failing report or read comes back as error, never as a rejection", async () => {
  const timers = new FakeTimers();
  const tracker = new OutcomeTracker({
    readText: async (p) => {
      if (p === "unreadable") throw new Error("EACCES");
      return "x = 2\n";
    },
    report: async () => {
      throw new Error("connection closed");
    },
    settleMs: 10,
    timers,
  });
  const a = tracker.track(edit);
  const b = tracker.track({ ...edit, path: "unreadable" });
  timers.advance(10);
  const [ra, rb] = await Promise.all([a, b]);
  assert.equal(ra?.kind, "persisted");
  assert.match(String(ra?.error), /connection closed/);
  assert.equal(rb?.kind, undefined);
  assert.match(String(rb?.error), /Could not read unreadable.*EACCES/);
});

test("dispose cancels pending timers; their promises resolve undefined and nothing is reported", async () => {
  const files = new Map([["a.py", "x = 2\n"]]);
  const { timers, reports, tracker } = setup(files);
  const pending = tracker.track(edit);
  tracker.expectWrite({ suggestionId: "s9", path: "c.py", beforeText: "" });
  assert.equal(timers.pending, 2);
  tracker.dispose();
  assert.equal(timers.pending, 0);
  assert.equal(await pending, undefined);
  timers.advance(5000);
  assert.deepEqual(reports, []);
  assert.equal(await tracker.track(edit), undefined, "a disposed tracker tracks nothing");
});

test("a rejected edit: written with the file's text when the person changed it; nothing when unchanged or deleted", async () => {
  const files = new Map([
    ["a.py", "x = 5  # mine\n"],
    ["b.py", "y = 1\n"],
  ]);
  const { timers, reports, tracker } = setup(files);
  const changed = tracker.trackRejected({ suggestionId: "r1", path: "a.py", beforeText: "x = 1\n" });
  const unchanged = tracker.trackRejected({ suggestionId: "r2", path: "b.py", beforeText: "y = 1\n" });
  const deleted = tracker.trackRejected({ suggestionId: "r3", path: "gone.py", beforeText: "z = 1\n" });
  const created = tracker.trackRejected({ suggestionId: "r4", path: "b.py", beforeText: undefined });
  assert.equal(tracker.followUpOf("r1"), changed);
  timers.advance(999);
  await Promise.resolve();
  assert.equal(reports.length, 0);
  timers.advance(1);
  const [r1, r2, r3, r4] = await Promise.all([changed, unchanged, deleted, created]);
  assert.deepEqual(r1, { kind: "written", finalText: "x = 5  # mine\n", reported: { acked: "r1" } });
  assert.deepEqual([r2, r3], [{}, {}], "nothing to report");
  assert.equal(r4?.kind, "written", "a file that did not exist and now does was written");
  assert.deepEqual(reports.sort((a, b) => a.id.localeCompare(b.id)), [
    { id: "r1", kind: "written", finalText: "x = 5  # mine\n" },
    { id: "r4", kind: "written", finalText: "y = 1\n" },
  ]);
});

test("an agent write to a rejected edit's path ends its follow-up; dispose ends it too", async () => {
  const files = new Map([["a.py", "x = 9\n"]]);
  const { timers, reports, tracker } = setup(files);
  const ended = tracker.trackRejected({ suggestionId: "r1", path: "a.py", beforeText: "x = 1\n" });
  const other = tracker.trackRejected({ suggestionId: "r2", path: "b.py", beforeText: "" });
  assert.equal(tracker.noteWritten("./a.py", "x = 9\n"), undefined, "no accept was waiting");
  assert.equal(await ended, undefined);
  assert.equal(tracker.pendingCount, 1);
  tracker.dispose();
  assert.equal(await other, undefined);
  timers.advance(5000);
  assert.deepEqual(reports, []);
});
