// Unit tests of AgentSession when the file changes under a proposal, against an in-process
// `ws` server playing the agent server's side of the real flow (read_file, edit.proposed,
// edit.outcome, then write_file of the accepted text) on real files (FsWorkspaceTools):
// the person's lines added meanwhile survive the write, a write over changed hunk lines is
// refused with file_changed, and a proposal the editor cannot show is reported as the
// editor's ("[editor] "), not as the person's rejection. A proposal the person rejects is
// followed up: the file rewritten by them is reported "written"; the editor's rejections are not.

import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { WebSocketServer, type WebSocket } from "ws";
import { AgentConnection } from "../../src/core/connection";
import { applyHunks } from "../../src/core/hunks";
import { OutcomeTracker } from "../../src/core/outcomes";
import { EDITOR_REASON_PREFIX } from "../../src/protocol/vocab";
import { AgentSession, type EditDecision, type EditorHost, type SessionEvent, type UnsavedTexts } from "../../src/core/session";
import { FsWorkspaceTools } from "../../src/core/tools";
import type { Hunk } from "../../src/protocol/messages";
import { FakeTimers, tempDir } from "./helpers";

type Frame = Record<string, unknown> & { type: string };
const READ = "a\nb = 2\nc\n";
const HUNKS: Hunk[] = [{ index: 0, header: "@@ -1,3 +1,3 @@", diff: "@@ -1,3 +1,3 @@\n a\n-b = 2\n+b = 3\n c\n" }];

let wss: WebSocketServer;
let url: string;
let script: (ws: WebSocket, m: Frame) => void = () => undefined;

before(async () => {
  wss = new WebSocketServer({ port: 0, host: "127.0.0.1" });
  await new Promise((r) => wss.once("listening", r));
  url = `ws://127.0.0.1:${(wss.address() as AddressInfo).port}/v1/ws`;
  wss.on("connection", (ws) => {
    ws.on("message", (data) => {
      const m = JSON.parse(data.toString()) as Frame;
      if (m.type === "hello") return ws.send(JSON.stringify({ type: "welcome", server: "fake", model: "m" }));
      script(ws, m);
    });
  });
});

after(() => new Promise<void>((r) => wss.close(() => r())));

const send = (ws: WebSocket, m: Record<string, unknown>) => ws.send(JSON.stringify(m));

interface Run {
  toolResults: Frame[]; // in order: the read, then the write
  outcome?: Frame;
  events: SessionEvent[];
}

/** One turn as the server's edit tool runs it: read_file path, propose HUNKS, wait for the
 * outcome, and unless rejected write_file the accepted hunks applied to what it read. */
async function runEdit(path: string, host: EditorHost, writePath = path): Promise<Run> {
  const run: Run = { toolResults: [], events: [] };
  let turnId: unknown;
  let served = "";
  script = (ws, m) => {
    if (m.type === "session.create") send(ws, { type: "session.info", id: m.id, session_id: "s1", mode: "interactive", title: "t", status: "idle", created_at: "now" });
    if (m.type === "user.message") {
      turnId = m.id;
      send(ws, { type: "tool.request", id: m.id, request_id: "read", session_id: "s1", method: "read_file", params: { path } });
    }
    if (m.type === "tool.result" && m.request_id === "read") {
      run.toolResults.push(m);
      served = String((m.result as { text?: string } | undefined)?.text ?? "");
      send(ws, { type: "edit.proposed", id: turnId, session_id: "s1", suggestion_id: "e1", path, diff: "d", hunks: HUNKS });
    }
    if (m.type === "edit.outcome") {
      run.outcome = m;
      send(ws, { type: "outcome.ack", id: m.id, suggestion_id: m.suggestion_id, client_event_id: m.client_event_id, outcome_id: "o1", duplicate: false });
      if (m.outcome === "rejected") return send(ws, { type: "turn.done", id: turnId, session_id: "s1", status: "finished" });
      const text = applyHunks(served, HUNKS, m.outcome === "accepted" ? [0] : ((m.accepted_hunks as number[]) ?? []));
      send(ws, { type: "tool.request", id: turnId, request_id: "write", session_id: "s1", method: "write_file", params: { path: writePath, text } });
    }
    if (m.type === "tool.result" && m.request_id === "write") {
      run.toolResults.push(m);
      send(ws, { type: "turn.done", id: turnId, session_id: "s1", status: "finished" });
    }
  };
  const conn = await AgentConnection.open({ url, clientName: "unit" });
  try {
    const session = await AgentSession.create(conn, host);
    session.onEvent((e) => run.events.push(e));
    const done = await session.send("edit it");
    assert.equal(done.status, "finished");
  } finally {
    conn.close();
  }
  return run;
}

function hostFor(root: string, review: () => Promise<EditDecision>): EditorHost {
  return { tools: new FsWorkspaceTools(root), reviewEdit: review, approveCommand: async () => false };
}

test("lines the person added while reviewing survive the accepted write", { timeout: 10_000 }, async () => {
  const ws = tempDir();
  try {
    const file = join(ws.path, "a.py");
    writeFileSync(file, READ);
    const run = await runEdit("a.py", hostFor(ws.path, async () => {
      writeFileSync(file, "# the person's line\n" + READ + "# and one below\n");
      return { outcome: "accepted" };
    }));
    assert.equal(run.outcome?.outcome, "accepted");
    assert.deepEqual(run.toolResults[1].result, { created: false });
    assert.equal(readFileSync(file, "utf8"), "# the person's line\na\nb = 3\nc\n# and one below\n");
    assert.ok(run.events.some((e) => e.kind === "write_rebased" && e.path === "a.py"));
  } finally {
    ws.cleanup();
  }
});

test("a write over lines the person changed is refused with file_changed; the file keeps their text", { timeout: 10_000 }, async () => {
  const ws = tempDir();
  try {
    const file = join(ws.path, "a.py");
    writeFileSync(file, READ);
    const mine = "a\nb = 99\nc\n";
    const run = await runEdit("a.py", hostFor(ws.path, async () => {
      writeFileSync(file, mine);
      return { outcome: "accepted" };
    }));
    assert.equal(run.outcome?.outcome, "accepted", "the person's accept is sent as it is");
    const error = run.toolResults[1].error as { code: string; message: string };
    assert.equal(error.code, "file_changed");
    assert.match(error.message, /Read the file again with read_file and redo your edit/);
    assert.equal(readFileSync(file, "utf8"), mine);
    assert.ok(run.events.some((e) => e.kind === "write_refused" && e.path === "a.py"));
  } finally {
    ws.cleanup();
  }
});

test("the write names the file differently ('./a.py'): still the same file to the guard", { timeout: 10_000 }, async () => {
  const ws = tempDir();
  try {
    const file = join(ws.path, "a.py");
    writeFileSync(file, READ);
    await runEdit("a.py", hostFor(ws.path, async () => {
      writeFileSync(file, "a\nb = 99\nc\n");
      return { outcome: "accepted" };
    }), "./a.py");
    assert.equal(readFileSync(file, "utf8"), "a\nb = 99\nc\n");
  } finally {
    ws.cleanup();
  }
});

test("a proposal the editor cannot show is rejected with an [editor] reason, not as the person's", { timeout: 10_000 }, async () => {
  const ws = tempDir();
  try {
    writeFileSync(join(ws.path, "a.py"), READ);
    const run = await runEdit("a.py", hostFor(ws.path, async () => {
      throw new Error("no editor window");
    }));
    assert.equal(run.outcome?.outcome, "rejected");
    assert.ok(String(run.outcome?.reason).startsWith(EDITOR_REASON_PREFIX), String(run.outcome?.reason));
    assert.match(String(run.outcome?.reason), /could not show the proposal: no editor window/);
    assert.equal(readFileSync(join(ws.path, "a.py"), "utf8"), READ);
  } finally {
    ws.cleanup();
  }
});

test("a never-read file open with different unsaved text is not overwritten", { timeout: 10_000 }, async () => {
  const ws = tempDir();
  try {
    writeFileSync(join(ws.path, "a.py"), READ);
    writeFileSync(join(ws.path, "b.py"), "saved\n");
    const tools = Object.assign(new FsWorkspaceTools(ws.path), {
      unsavedText: async (p: string) => (p === "b.py" ? "typed, not saved\n" : undefined),
    }) satisfies UnsavedTexts;
    const host: EditorHost = { tools, reviewEdit: async () => ({ outcome: "accepted" }), approveCommand: async () => false };
    const run = await runEdit("a.py", host, "b.py"); // read a.py, write b.py (never read)
    assert.equal((run.toolResults[1].error as { code: string }).code, "file_changed");
    assert.equal(readFileSync(join(ws.path, "b.py"), "utf8"), "saved\n");
  } finally {
    ws.cleanup();
  }
});

test("a rejected proposal is followed up: written with the person's text; an [editor] rejection is not", { timeout: 10_000 }, async () => {
  const ws = tempDir();
  try {
    writeFileSync(join(ws.path, "a.py"), READ);
    const timers = new FakeTimers();
    const reports: Array<{ id: string; kind: string; finalText?: string }> = [];
    const tools = new FsWorkspaceTools(ws.path);
    const outcomes = new OutcomeTracker({
      readText: (p) => tools.readFile(p).catch(() => undefined),
      report: (id, kind, extra) => void reports.push({ id, kind, ...extra }),
      settleMs: 1000,
      timers,
    });
    const host: EditorHost = { ...hostFor(ws.path, async () => ({ outcome: "rejected", reason: "no" })), outcomes };
    const run = await runEdit("a.py", host);
    assert.equal(run.outcome?.outcome, "rejected");
    writeFileSync(join(ws.path, "a.py"), "a\nb = 4  # what I meant\nc\n"); // the person writes it their way
    timers.advance(1000);
    const followUp = await outcomes.followUpOf("e1");
    assert.equal(followUp?.kind, "written", String(followUp?.error));
    assert.deepEqual(reports, [{ id: "e1", kind: "written", finalText: "a\nb = 4  # what I meant\nc\n" }]);

    const editor = new OutcomeTracker({ readText: async () => "changed", report: () => undefined, settleMs: 1000, timers });
    await runEdit("a.py", { ...hostFor(ws.path, async () => { throw new Error("no editor window"); }), outcomes: editor });
    assert.equal(editor.followUpOf("e1"), undefined, "the editor's rejection is not the person's");
    assert.equal(editor.pendingCount, 0);
    outcomes.dispose();
  } finally {
    ws.cleanup();
  }
});
