// Unit tests of src/core/hunkPlacement.ts: hunks placed in a file the person changed after
// the server read it (lines added above, below and between hunks: offset placement), real
// conflicts (a hunk's own lines changed, an ambiguous place), and the layout on both
// documents. The proposals are the server's own (fixtures from edits_diff.split_hunks).

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { HunkError, applyHunks } from "../../src/core/hunks";
import { hunkAtLine, hunkPlaces, locateHunks, rebaseHunks } from "../../src/core/hunkPlacement";
import type { Hunk } from "../../src/protocol/messages";
import { packageRoot } from "./helpers";

interface Case {
  name: string;
  old: string;
  new: string;
  hunks: Hunk[];
}

const fixtures = JSON.parse(readFileSync(join(packageRoot(), "test/unit/fixtures/hunks.json"), "utf8")) as { cases: Case[] };
const twoHunks = fixtures.cases.find((c) => c.name === "two far-apart hunks")!;
const all = (c: { hunks: Hunk[] }) => c.hunks.map((h) => h.index);

test("the fixture used below has two hunks 10+ lines apart", () => {
  assert.equal(twoHunks.hunks.length, 2);
  assert.match(twoHunks.old, /line 17\n/);
});

test("unchanged file: every fixture's hunks sit at their own lines and rebase = apply", () => {
  for (const c of fixtures.cases) {
    const { located, conflicts } = locateHunks(c.old, c.hunks);
    assert.deepEqual(conflicts, [], c.name);
    assert.ok(located.every((l) => l.offset === 0), c.name);
    assert.equal(rebaseHunks(c.old, c.hunks, all(c)), c.new, c.name);
  }
});

test("lines added above every hunk: each fixture's hunks move down and apply there", () => {
  const added = "# added by the person\n# and another line\n";
  for (const c of fixtures.cases) {
    if (c.old === "") continue; // an empty file has no lines to anchor to (own test below)
    const { located, conflicts } = locateHunks(added + c.old, c.hunks);
    assert.deepEqual(conflicts, [], c.name);
    assert.ok(located.every((l) => l.offset === 2), `${c.name}: ${JSON.stringify(located.map((l) => l.offset))}`);
    assert.equal(rebaseHunks(added + c.old, c.hunks, all(c)), added + c.new, c.name);
  }
});

test("lines added below every hunk: nothing moves, the additions stay", () => {
  for (const c of fixtures.cases) {
    if (c.old === "" || !/\n$/.test(c.old)) continue; // appending needs a final newline
    const tail = "# appended by the person\n";
    assert.equal(rebaseHunks(c.old + tail, c.hunks, all(c)), c.new + tail, c.name);
  }
});

test("lines added and removed between two hunks: the second hunk shifts, the first does not", () => {
  const c = twoHunks;
  const withInserted = c.old.replace("line 10\n", "line 10\nperson 1\nperson 2\nperson 3\n");
  assert.notEqual(withInserted, c.old);
  const { located } = locateHunks(withInserted, c.hunks);
  assert.deepEqual(located.map((l) => l.offset), [0, 3]);
  assert.equal(rebaseHunks(withInserted, c.hunks, [0, 1]), c.new.replace("line 10\n", "line 10\nperson 1\nperson 2\nperson 3\n"));
  // Only the second hunk accepted: the first stays as the person has it.
  assert.equal(rebaseHunks(withInserted, c.hunks, [1]), applyHunks(c.old, c.hunks, [1]).replace("line 10\n", "line 10\nperson 1\nperson 2\nperson 3\n"));

  const withRemoved = c.old.replace("line 10\nline 11\n", "");
  assert.deepEqual(locateHunks(withRemoved, c.hunks).located.map((l) => l.offset), [0, -2]);
  assert.equal(rebaseHunks(withRemoved, c.hunks, [0, 1]), c.new.replace("line 10\nline 11\n", ""));
});

test("a hunk whose own lines changed is a conflict; the other hunk still places", () => {
  const c = twoHunks;
  const changed = c.old.replace("line 17\n", "edited meanwhile\n");
  const { located, conflicts } = locateHunks(changed, c.hunks);
  assert.deepEqual(located.map((l) => l.hunk.index), [0]);
  assert.equal(conflicts.length, 1);
  assert.equal(conflicts[0].index, 1);
  assert.match(conflicts[0].reason, /^hunk 2's lines \d+-\d+ changed$/);
  assert.throws(() => rebaseHunks(changed, c.hunks, [0, 1]), (e: unknown) => e instanceof HunkError && /hunk 2's lines/.test((e as Error).message));
  // Accepting only the hunk that still fits is fine; the conflicting one changes nothing.
  assert.equal(rebaseHunks(changed, c.hunks, [0]), applyHunks(c.old, c.hunks, [0]).replace("line 17\n", "edited meanwhile\n"));
});

// A one-hunk proposal made by hand in the server's format: "b = 2" -> "b = 3" between
// context lines that the person then duplicates elsewhere.
const oneHunk: Hunk[] = [{ index: 0, header: "@@ -2,3 +2,3 @@", diff: "@@ -2,3 +2,3 @@\n a\n-b = 2\n+b = 3\n c\n" }];

test("the nearest copy of a hunk's lines wins; two copies equally near are a conflict", () => {
  const base = "top\na\nb = 2\nc\nend\n";
  assert.equal(rebaseHunks(base, oneHunk, [0]), "top\na\nb = 3\nc\nend\n");
  // The person pasted a copy of the block 3 lines below: the original (offset 0) is nearer.
  const copiedBelow = "top\na\nb = 2\nc\nx\na\nb = 2\nc\nend\n";
  assert.equal(rebaseHunks(copiedBelow, oneHunk, [0]), "top\na\nb = 3\nc\nx\na\nb = 2\nc\nend\n");
  // The block moved: its copies start at lines 0 and 6, the hunk expects line 1: 0 is nearer.
  const twoCopies = "a\nb = 2\nc\nq\nr\ns\na\nb = 2\nc\n";
  assert.equal(rebaseHunks(twoCopies, oneHunk, [0]), "a\nb = 3\nc\nq\nr\ns\na\nb = 2\nc\n");
  // A hunk expected at line 2 whose block now starts at 0 and at 4: equally near, no guess.
  const atLine3: Hunk[] = [{ index: 0, header: "@@ -3,3 +3,3 @@", diff: "@@ -3,3 +3,3 @@\n a\n-b = 2\n+b = 3\n c\n" }];
  const where = locateHunks("a\nb = 2\nc\nq\na\nb = 2\nc\n", atLine3);
  assert.deepEqual(where.located, []);
  assert.match(where.conflicts[0].reason, /two places equally near/);
});

test("a proposal for an empty file fits only a file still empty", () => {
  const create: Hunk[] = [{ index: 0, header: "@@ -0,0 +1,2 @@", diff: "@@ -0,0 +1,2 @@\n+one\n+two\n" }];
  assert.equal(rebaseHunks("", create, [0]), "one\ntwo\n");
  const { conflicts } = locateHunks("typed meanwhile\n", create);
  assert.match(conflicts[0].reason, /written for an empty file, which now has text/);
});

test("hunkPlaces lays located hunks out on the file and the proposal; hunkAtLine finds them", () => {
  const c = twoHunks;
  const shifted = "p\nq\n" + c.old; // two lines above everything: every place moves by 2
  const places = hunkPlaces(locateHunks(shifted, c.hunks).located);
  const unshifted = hunkPlaces(locateHunks(c.old, c.hunks).located);
  const current = shifted.split("\n");
  const proposed = rebaseHunks(shifted, c.hunks, [0, 1]).split("\n");
  assert.equal(places.length, 2);
  for (const [i, p] of places.entries()) {
    const h = c.hunks.find((x) => x.index === p.index)!;
    const body = h.diff.split("\n").slice(1);
    const removed = body.filter((l) => l.startsWith("-")).map((l) => l.slice(1));
    const added = body.filter((l) => l.startsWith("+")).map((l) => l.slice(1));
    assert.deepEqual(p.removedLines.map((l) => current[l]), removed, `hunk ${p.index}'s removed lines in the file`);
    assert.deepEqual(p.addedLines.map((l) => proposed[l]), added, `hunk ${p.index}'s added lines in the proposal`);
    assert.equal(p.oldStart, unshifted[i].oldStart + 2);
    assert.equal(p.newStart, unshifted[i].newStart + 2);
    assert.equal(hunkAtLine(places, p.oldStart, false), p.index);
    assert.equal(hunkAtLine(places, p.newStart, true), p.index);
  }
  assert.equal(hunkAtLine(places, 0, false), undefined, "the person's lines above belong to no hunk");
});
