// Unit tests of src/core/hunks.ts: applyHunks reproduces the server's edits_diff.apply_hunks
// on fixtures it generated (tests/vscode/make_hunk_fixtures.py), refuses stale or unknown
// hunks, and ProposalReview turns per-hunk decisions into one EditDecision.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { HunkError, ProposalReview, applyHunks } from "../../src/core/hunks";
import type { EditDecision } from "../../src/core/session";
import type { Hunk } from "../../src/protocol/messages";
import { packageRoot } from "./helpers";

interface Case {
  name: string;
  old: string;
  new: string;
  hunks: Hunk[];
  applied: Array<{ accepted: number[]; text: string }>;
}

const fixtures = JSON.parse(readFileSync(join(packageRoot(), "test/unit/fixtures/hunks.json"), "utf8")) as { cases: Case[] };

test("fixtures cover many hunk shapes", () => {
  assert.ok(fixtures.cases.length >= 10);
  assert.ok(fixtures.cases.some((c) => c.hunks.length >= 3));
});

for (const c of fixtures.cases) {
  test(`applyHunks matches edits_diff.apply_hunks: ${c.name}`, () => {
    for (const { accepted, text } of c.applied) {
      assert.equal(applyHunks(c.old, c.hunks, accepted), text, `accepted ${JSON.stringify(accepted)}`);
    }
    const all = c.hunks.map((h) => h.index);
    assert.equal(applyHunks(c.old, c.hunks, all), c.new, "all hunks give the proposal");
    assert.equal(applyHunks(c.old, c.hunks, []), c.old, "no hunk gives the old text");
  });
}

test("applyHunks refuses unknown indices and a file that changed since the proposal", () => {
  const c = fixtures.cases.find((x) => x.name === "two far-apart hunks")!;
  assert.throws(() => applyHunks(c.old, c.hunks, [0, 5]), /Hunk indices \[5\] do not exist; this proposal has 2 hunks/);
  const changed = c.old.replace("line 17\n", "edited meanwhile\n");
  assert.throws(() => applyHunks(changed, c.hunks, [1]), (err: unknown) => err instanceof HunkError && /changed since the proposal/.test((err as Error).message));
  assert.throws(() => applyHunks("x", [{ index: 0, header: "nope", diff: "nope\n" }], [0]), /does not start with an @@ header/);
});

const HUNKS: Hunk[] = [0, 1, 2].map((index) => ({ index, header: "@@", diff: "@@" }));

function decided(review: ProposalReview): EditDecision[] {
  const seen: EditDecision[] = [];
  review.onDecided((d) => seen.push(d));
  return seen;
}

test("ProposalReview: undecided until every hunk is decided, then announced once", () => {
  const review = new ProposalReview(HUNKS);
  const seen = decided(review);
  review.decideHunk(0, true);
  review.decideHunk(2, false);
  assert.equal(review.decision(), undefined);
  assert.equal(review.decided(1), undefined);
  review.setReason("keep the old name");
  review.decideHunk(1, true);
  const expected = { outcome: "partially_accepted", acceptedHunks: [0, 1], reason: "keep the old name" };
  assert.deepEqual(review.decision(), expected);
  assert.deepEqual(seen, [expected]);
  review.decideHunk(2, true); // a change of mind updates decision() but is not announced again
  assert.deepEqual(review.decision(), { outcome: "accepted" });
  assert.equal(seen.length, 1);
});

test("ProposalReview: all accepted, all rejected with a reason, unknown hunk", () => {
  const yes = new ProposalReview(HUNKS);
  for (const h of HUNKS) yes.decideHunk(h.index, true);
  assert.deepEqual(yes.decision(), { outcome: "accepted" });

  const no = new ProposalReview(HUNKS);
  const seen = decided(no);
  no.rejectAll("wrong file");
  assert.deepEqual(seen, [{ outcome: "rejected", reason: "wrong file" }]);

  const all = new ProposalReview(HUNKS);
  all.acceptAll();
  assert.deepEqual(all.decision(), { outcome: "accepted" });
  assert.throws(() => all.decideHunk(7, true), /Hunk 7 does not exist; this proposal has hunks \[0,1,2\]/);
});

test("ProposalReview of a proposal without hunks is decided by acceptAll/rejectAll", () => {
  const empty = new ProposalReview([]);
  assert.equal(empty.decision(), undefined);
  empty.rejectAll();
  assert.deepEqual(empty.decision(), { outcome: "rejected" });
});
