// Unit tests of src/core/writeGuard.ts: a write_file goes through as sent when the file is as
// the agent read it, is re-applied on top of the person's changes when it is exactly their
// accepted proposal, and is refused ("file_changed", telling the agent to read again) when
// it would undo anything the person did; never-read files are checked against unsaved text.

import assert from "node:assert/strict";
import { test } from "node:test";
import { ToolError } from "../../src/core/tools";
import { ABSENT, WriteGuard, decideWrite, pathKey, type AcceptedHunks, type WriteVerdict } from "../../src/core/writeGuard";
import type { Hunk } from "../../src/protocol/messages";

const READ = "a\nb = 2\nc\n";
const HUNKS: Hunk[] = [{ index: 0, header: "@@ -1,3 +1,3 @@", diff: "@@ -1,3 +1,3 @@\n a\n-b = 2\n+b = 3\n c\n" }];
const AGENT_TEXT = "a\nb = 3\nc\n"; // the server's write of the accepted hunk
const ACCEPTED: AcceptedHunks = { suggestionId: "s1", hunks: HUNKS, accepted: [0] };

function refused(v: WriteVerdict): ToolError {
  assert.ok("refuse" in v, `expected a refusal, got ${JSON.stringify(v)}`);
  return v.refuse;
}

test("unchanged file: the agent's text is written as sent", () => {
  assert.deepEqual(decideWrite({ path: "a.py", incoming: AGENT_TEXT, current: READ, served: READ, unsaved: undefined }), { write: AGENT_TEXT, rebased: false });
  assert.deepEqual(decideWrite({ path: "a.py", incoming: AGENT_TEXT, current: READ, served: READ, unsaved: undefined, accepted: ACCEPTED }), { write: AGENT_TEXT, rebased: false });
});

test("the person added lines above the accepted hunk: it is applied where its lines are now", () => {
  const now = "# mine\n" + READ + "# also mine\n";
  assert.deepEqual(decideWrite({ path: "a.py", incoming: AGENT_TEXT, current: now, served: READ, unsaved: undefined, accepted: ACCEPTED }), {
    write: "# mine\n" + AGENT_TEXT + "# also mine\n",
    rebased: true,
  });
});

test("the hunk's own lines changed: refused with file_changed and a message for the agent", () => {
  const now = "a\nb = 7\nc\n";
  const err = refused(decideWrite({ path: "a.py", incoming: AGENT_TEXT, current: now, served: READ, unsaved: undefined, accepted: ACCEPTED }));
  assert.equal(err.code, "file_changed");
  assert.match(err.message, /^'a\.py' changed where your edit applies \(hunk 1's lines 1-3 changed\) since you read it/);
  assert.match(err.message, /Read the file again with read_file and redo your edit/);
});

test("a changed file and a write that is not the accepted proposal (or none accepted): refused", () => {
  const now = "# mine\n" + READ;
  assert.equal(refused(decideWrite({ path: "a.py", incoming: AGENT_TEXT, current: now, served: READ, unsaved: undefined })).code, "file_changed");
  const other = "something else entirely\n";
  assert.match(refused(decideWrite({ path: "a.py", incoming: other, current: now, served: READ, unsaved: undefined, accepted: ACCEPTED })).message, /was changed by the user/);
  assert.match(refused(decideWrite({ path: "a.py", incoming: AGENT_TEXT, current: undefined, served: READ, unsaved: undefined })).message, /was deleted since you read it/);
  // ... unless the file already holds exactly the agent's text (nothing would be lost).
  assert.deepEqual(decideWrite({ path: "a.py", incoming: AGENT_TEXT, current: AGENT_TEXT, served: READ, unsaved: undefined }), { write: AGENT_TEXT, rebased: false });
});

test("never read: written, unless open with different unsaved text", () => {
  assert.deepEqual(decideWrite({ path: "new.py", incoming: "x\n", current: undefined, served: undefined, unsaved: undefined }), { write: "x\n", rebased: false });
  assert.deepEqual(decideWrite({ path: "old.py", incoming: "x\n", current: "saved\n", served: undefined, unsaved: undefined }), { write: "x\n", rebased: false });
  assert.equal(refused(decideWrite({ path: "old.py", incoming: "x\n", current: "typing\n", served: undefined, unsaved: "typing\n" })).code, "file_changed");
  assert.deepEqual(decideWrite({ path: "old.py", incoming: "x\n", current: "x\n", served: undefined, unsaved: "x\n" }), { write: "x\n", rebased: false });
});

test("read as missing, then created by the person: refused; still missing: written", () => {
  assert.deepEqual(decideWrite({ path: "n.py", incoming: "x\n", current: undefined, served: ABSENT, unsaved: undefined }), { write: "x\n", rebased: false });
  assert.match(refused(decideWrite({ path: "n.py", incoming: "x\n", current: "person's\n", served: ABSENT, unsaved: undefined })).message, /did not exist when you looked, but the user created it/);
});

test("WriteGuard: remembers reads per normalized path; an accept is used by one write only", () => {
  assert.equal(pathKey("./src/../a.py"), "a.py");
  assert.equal(pathKey("src//b.py"), "src/b.py");
  const guard = new WriteGuard();
  guard.noteServed("./a.py", READ);
  assert.equal(guard.servedText("a.py"), READ);
  guard.noteAccepted("a.py", ACCEPTED);
  const now = "# mine\n" + READ;
  assert.deepEqual(guard.decide("a.py", AGENT_TEXT, now, undefined), { write: "# mine\n" + AGENT_TEXT, rebased: true });
  guard.noteWritten("a.py", AGENT_TEXT); // what the agent believes the file holds
  // A second blind write built on that belief would drop "# mine": refused.
  assert.equal(refused(guard.decide("a.py", "a\nb = 4\nc\n", "# mine\n" + AGENT_TEXT, undefined)).code, "file_changed");
  // After a fresh read it goes through.
  guard.noteServed("a.py", "# mine\n" + AGENT_TEXT);
  assert.deepEqual(guard.decide("a.py", "b = 4\n", "# mine\n" + AGENT_TEXT, undefined), { write: "b = 4\n", rebased: false });
});
