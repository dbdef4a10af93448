// Integration test of the core against the real agent server (tests/vscode/scripted_server.py:
// the real app, protocol, auth and feedback database, with a scripted model). The model
// proposes a.py x = 1 -> x = 2 and b.py y = 1 -> y = 2; the "person" accepts a.py and rejects
// b.py with a reason; the accepted edit is followed up as persisted; the database must hold
// exactly that (read back with tests/vscode/dump_outcomes.py).
// Env: APPRENTICE_PYTHON (default <repo>/.venv/bin/python), APPRENTICE_TEST_DATABASE_URL
// (default: a SQLite file in a temp dir).

import assert from "node:assert/strict";
import { spawn, execFile, type ChildProcess } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, before, test } from "node:test";
import { promisify } from "node:util";
import { AgentConnection } from "../../src/core/connection";
import { ConnectionFailed, ServerError } from "../../src/core/errors";
import { OutcomeTracker } from "../../src/core/outcomes";
import { AgentSession, type EditorHost, type SessionEvent } from "../../src/core/session";
import { FsWorkspaceTools } from "../../src/core/tools";
import type { EditProposed } from "../../src/protocol/messages";
import { packageRoot, tempDir } from "../unit/helpers";

const REPO = join(packageRoot(), "..");
const PYTHON = process.env.APPRENTICE_PYTHON || join(REPO, ".venv/bin/python");
const READY_TIMEOUT_MS = 90_000;
const REJECT_REASON = "b.py must keep y = 1";

interface Ready {
  port: number;
  ws_url: string;
  token: string;
}

let home: ReturnType<typeof tempDir>;
let databaseUrl: string;
let server: ChildProcess | undefined;
let ready: Ready;
let serverLog = "";

function startServer(): Promise<Ready> {
  return new Promise((resolve, reject) => {
    const child = spawn(PYTHON, ["-m", "tests.vscode.scripted_server", "--database-url", databaseUrl, "--home", home.path], {
      cwd: REPO,
      stdio: ["ignore", "pipe", "pipe"],
    });
    server = child;
    const timer = setTimeout(() => reject(new Error(`the scripted server printed no ready line within ${READY_TIMEOUT_MS} ms:\n${serverLog}`)), READY_TIMEOUT_MS);
    child.stderr!.on("data", (d: Buffer) => (serverLog += d.toString()));
    child.on("error", (err) => reject(new Error(`cannot start ${PYTHON}: ${err.message} (set APPRENTICE_PYTHON)`)));
    child.on("exit", (code) => reject(new Error(`the scripted server exited (${code}) before it was ready:\n${serverLog}`)));
    createInterface({ input: child.stdout! }).once("line", (line) => {
      clearTimeout(timer);
      try {
        resolve(JSON.parse(line) as Ready);
      } catch {
        reject(new Error(`the server's first line is not the JSON ready line: ${line}`));
      }
    });
  });
}

before(async () => {
  home = tempDir("apprentice-home-");
  databaseUrl = process.env.APPRENTICE_TEST_DATABASE_URL || `sqlite:///${join(home.path, "feedback.db")}`;
  ready = await startServer();
});

after(async () => {
  if (server && server.exitCode === null) {
    const exited = new Promise((r) => server!.once("exit", r));
    server.kill("SIGTERM");
    const timer = setTimeout(() => server!.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
  }
  home.cleanup();
});

interface Dumped {
  suggestions: Array<{ id: string; kind: string; file_path: string | null; outcomes: Array<{ kind: string; reason: string | null; client_event_id: string }> }>;
}

async function dumpOutcomes(sessionId: string): Promise<Dumped> {
  const { stdout } = await promisify(execFile)(PYTHON, ["-m", "tests.vscode.dump_outcomes", "--database-url", databaseUrl, "--session", sessionId], { cwd: REPO });
  return JSON.parse(stdout) as Dumped;
}

test("a turn: accept a.py, reject b.py with a reason, a.py followed up as persisted, all stored", async () => {
  const workspace = tempDir("apprentice-ws-");
  const conn = await AgentConnection.open({ url: ready.ws_url, token: ready.token, clientName: "apprentice-vscode-integration-test" });
  try {
    writeFileSync(join(workspace.path, "a.py"), "x = 1\n");
    writeFileSync(join(workspace.path, "b.py"), "y = 1\n");
    const tools = new FsWorkspaceTools(workspace.path);
    let session: AgentSession | undefined;
    const outcomes = new OutcomeTracker({
      settleMs: 500,
      readText: (p) => tools.readFile(p).catch(() => undefined),
      report: (id, kind, extra) => session!.reportOutcome(id, kind, extra),
    });
    const reviewed: EditProposed[] = [];
    const host: EditorHost = {
      tools,
      outcomes,
      reviewEdit: async (p) => {
        reviewed.push(p);
        assert.ok(p.hunks.length >= 1 && p.diff.includes(`+++ b/${p.path}`), JSON.stringify(p));
        return p.path === "a.py" ? { outcome: "accepted" } : { outcome: "rejected", reason: REJECT_REASON };
      },
      approveCommand: async () => false,
    };
    assert.equal(conn.welcome.type, "welcome");
    session = await AgentSession.create(conn, host, { title: "integration", workspace: workspace.path });
    const events: SessionEvent[] = [];
    session.onEvent((e) => events.push(e));

    const done = await session.send("Set x to 2 in a.py and y to 2 in b.py.", { path: "a.py", language: "python" });

    assert.equal(done.status, "finished", JSON.stringify(done));
    assert.equal(readFileSync(join(workspace.path, "a.py"), "utf8"), "x = 2\n");
    assert.equal(readFileSync(join(workspace.path, "b.py"), "utf8"), "y = 1\n");
    assert.deepEqual(reviewed.map((p) => p.path), ["a.py", "b.py"]);
    const decided = events.filter((e) => e.kind === "edit_decided");
    assert.equal(decided.length, 2);
    for (const e of decided) assert.ok(e.kind === "edit_decided" && e.ack && !e.ack.duplicate, JSON.stringify(e));
    assert.ok(events.some((e) => e.kind === "done"));

    const aId = reviewed[0].suggestion_id;
    const bId = reviewed[1].suggestion_id;
    const followUp = await outcomes.followUpOf(aId);
    assert.ok(followUp, "the accepted write was tracked");
    assert.equal(followUp.kind, "persisted", String(followUp.error));
    const ack = followUp.reported as { type: string; duplicate: boolean; client_event_id: string };
    assert.equal(ack.type, "outcome.ack");
    assert.equal(ack.duplicate, false);

    // A resend with the same client_event_id is acknowledged as a duplicate and stored once.
    const again = await session.reportOutcome(aId, "persisted", { clientEventId: ack.client_event_id });
    assert.equal(again.duplicate, true);

    const dumped = await dumpOutcomes(session.id);
    const edits = dumped.suggestions.filter((s) => s.kind === "edit");
    assert.equal(edits.length, 2, JSON.stringify(dumped));
    const a = edits.find((s) => s.id === aId)!;
    const b = edits.find((s) => s.id === bId)!;
    const aKinds = a.outcomes.map((o) => o.kind);
    assert.ok(aKinds.includes("accepted") && aKinds.includes("persisted"), aKinds.join(","));
    assert.equal(aKinds.filter((k) => k === "persisted").length, 1, "the resend stored nothing new");
    assert.ok(!aKinds.includes("rejected"));
    const bRejected = b.outcomes.filter((o) => o.kind === "rejected");
    assert.equal(bRejected.length, 1, JSON.stringify(b.outcomes));
    assert.equal(bRejected[0].reason, REJECT_REASON);
    assert.ok(!b.outcomes.some((o) => o.kind === "accepted"));
    outcomes.dispose();
    session.dispose();
  } finally {
    conn.close();
    workspace.cleanup();
  }
});

test("a wrong token is refused as unauthorized; a closed port is unreachable", async () => {
  await assert.rejects(
    AgentConnection.open({ url: ready.ws_url, token: "wrong-token", clientName: "test" }),
    (err: unknown) => err instanceof ConnectionFailed && err.kind === "unauthorized" && /Set Server Token/.test(err.message) && !err.message.includes("wrong-token"),
  );
  await assert.rejects(
    AgentConnection.open({ url: "ws://127.0.0.1:9/v1/ws", token: ready.token, clientName: "test", timeoutMs: 3000 }),
    (err: unknown) => err instanceof ConnectionFailed && err.kind === "unreachable" && /ECONNREFUSED/.test(err.message),
  );
});

test("a session resumes on a new connection; resuming an unknown one is a ServerError", async () => {
  const workspace = tempDir("apprentice-ws-");
  const host: EditorHost = {
    tools: new FsWorkspaceTools(workspace.path),
    reviewEdit: async () => ({ outcome: "rejected", reason: "not now" }),
    approveCommand: async () => false,
  };
  try {
    const first = await AgentConnection.open({ url: ready.ws_url, token: ready.token, clientName: "test" });
    const created = await AgentSession.create(first, host, { title: "to resume" });
    first.close();
    await new Promise((r) => setTimeout(r, 200));
    const second = await AgentConnection.open({ url: ready.ws_url, token: ready.token, clientName: "test" });
    try {
      const resumed = await AgentSession.resume(second, host, created.id);
      assert.equal(resumed.id, created.id);
      assert.equal(resumed.info.resumed, true);
      await assert.rejects(AgentSession.resume(second, host, "00000000-0000-0000-0000-000000000000"), (err: unknown) => err instanceof ServerError && err.code === "session_not_found");
    } finally {
      second.close();
    }
  } finally {
    workspace.cleanup();
  }
});
