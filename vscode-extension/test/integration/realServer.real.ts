// Integration test of the extension's core against the REAL agent server: `apprentice serve`
// (the CLI) with the embedded backend on the real dev model, its token read from the home
// (realServerProcess.ts). Unlike session.test.ts (scripted model: the loop's logic), this
// proves the real parts fit: an inline completion shown and accepted, a chat turn whose tool
// requests are all answered from a real workspace, and what the database stored of both.
// The dev model is tiny, so the test asserts the protocol and the records, not the answers.
//
// Built and run by `npm run test:real` only (its name does not end in .test.ts, so
// `npm test` / `test:integration` leave it out: it loads a model and takes a while).
// Env: APPRENTICE_TEST_MODEL (default <repo>/.cache/dev-model), APPRENTICE_CLI (default
// <repo>/.venv/bin/apprentice), APPRENTICE_PYTHON (default <repo>/.venv/bin/python, for
// tests/vscode/dump_outcomes.py), APPRENTICE_TEST_DATABASE_URL (default: the server's SQLite
// under its temp home), APPRENTICE_TEST_TURN_BUDGET_S (default 120: then the turn is cancelled,
// the agent having no step or time cap in the settings).

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { promisify } from "node:util";
import { AgentConnection } from "../../src/core/connection";
import { AgentSession, sendOutcome, type EditorHost, type SessionEvent } from "../../src/core/session";
import { FsWorkspaceTools } from "../../src/core/tools";
import { isMessage, type ClientMessage, type EditProposed, type ServerMessage, type TurnDone } from "../../src/protocol/messages";
import { packageRoot, tempDir } from "../unit/helpers";
import { startRealServer, type RealServer } from "./realServerProcess";

const REPO = join(packageRoot(), "..");
const CLI = process.env.APPRENTICE_CLI || join(REPO, ".venv/bin/apprentice");
const PYTHON = process.env.APPRENTICE_PYTHON || join(REPO, ".venv/bin/python");
const MODEL = process.env.APPRENTICE_TEST_MODEL || join(REPO, ".cache/dev-model");
const READY_TIMEOUT_MS = 180_000; // the model loads on the CPU, maybe beside other test runs
const COMPLETION_TIMEOUT_MS = 120_000;
const TURN_BUDGET_MS = Number(process.env.APPRENTICE_TEST_TURN_BUDGET_S || 120) * 1000;
const CANCEL_GRACE_MS = 60_000; // a cancelled turn ends after the model call in flight
const REJECT_REASON = "keep a.py as it is";
// APPRENTICE_TEST_ONLY=completion: define only the completion test (the pytest run on the real
// pretrained model, where a chat turn would take minutes); the completion must then be code:
// non-empty, no markdown fence, no chat reply.
const ONLY_COMPLETION = process.env.APPRENTICE_TEST_ONLY === "completion";
const chatTest: typeof test = ONLY_COMPLETION ? ((() => undefined) as unknown as typeof test) : test;
// The agent's RunStatus values (docs/protocol.md, turn.done).
const RUN_STATUSES = ["finished", "step_limit", "time_limit", "too_many_errors", "cancelled", "model_error", "context_overflow"];

let home: ReturnType<typeof tempDir>;
let server: RealServer | undefined;

function elapsed(since: number): string {
  return `${((Date.now() - since) / 1000).toFixed(1)} s`;
}

before(async () => {
  home = tempDir("apprentice-real-home-");
  const started = Date.now();
  server = await startRealServer({
    cli: CLI,
    home: home.path,
    modelDir: MODEL,
    databaseUrl: process.env.APPRENTICE_TEST_DATABASE_URL || undefined,
    readyTimeoutMs: READY_TIMEOUT_MS,
  });
  console.log(`real server up (db upgrade + model load) in ${elapsed(started)}; model ${server.modelName}`);
});

after(async () => {
  if (server) {
    const stopping = Date.now();
    const stopped = await server.stop();
    console.log(`real server stopped in ${elapsed(stopping)}: ${JSON.stringify(stopped)}`);
    // SIGTERM is a clean stop for uvicorn (it exits by re-raising the signal, or with 0).
    assert.ok(!stopped.killed && (stopped.code === 0 || stopped.signal === "SIGTERM"), withLog(stopped));
  }
  home?.cleanup();
});

interface DumpedSuggestion {
  id: string;
  session_id: string | null;
  kind: string;
  file_path: string | null;
  proposed: string;
  model: string;
  adapter_version: number | null;
  completion_token_ids: number[];
  completion_logprobs: number[];
  outcomes: Array<{ kind: string; reason: string | null; accepted_length: number | null }>;
}

interface Dumped {
  suggestions: DumpedSuggestion[];
  events: Array<{ seq: number; kind: string; role: string | null; loop_kind: string | null }>;
}

async function dumpDatabase(args: string[]): Promise<Dumped> {
  const { stdout } = await promisify(execFile)(PYTHON, ["-m", "tests.vscode.dump_outcomes", "--database-url", server!.databaseUrl, ...args], { cwd: REPO });
  return JSON.parse(stdout) as Dumped;
}

/** Fails with the server's log attached, so a failure on the real model can be read. */
function withLog(detail: unknown): string {
  return `${typeof detail === "string" ? detail : JSON.stringify(detail)}\n--- server log (tail) ---\n${server!.log().slice(-6000)}`;
}

test("a completion from the real model: shown and accepted, stored with tokens, logprobs and model", async () => {
  const conn = await AgentConnection.open({ url: server!.wsUrl, token: server!.token, clientName: "apprentice-vscode-real-test" });
  try {
    const started = Date.now();
    const suggestion = await conn.request(
      { type: "completion.request", prefix: "def add(a, b):\n    return ", path: "m.py", language: "python", max_tokens: 16 },
      isMessage("completion.suggestion"),
      COMPLETION_TIMEOUT_MS,
    );
    console.log(`completion in ${elapsed(started)}: ${JSON.stringify(suggestion.text)}`);
    assert.ok(suggestion.suggestion_id.length > 0, withLog(suggestion));
    assert.equal(typeof suggestion.text, "string");
    if (ONLY_COMPLETION) {
      assert.ok(suggestion.text.trim().length > 0, `an empty completion${withLog(suggestion)}`);
      assert.ok(!suggestion.text.includes("```"), `a markdown fence in ${JSON.stringify(suggestion.text)}`);
    }

    const shown = await sendOutcome(conn, suggestion.suggestion_id, "shown");
    const accepted = await sendOutcome(conn, suggestion.suggestion_id, "accepted", { acceptedLength: suggestion.text.length });
    for (const ack of [shown, accepted]) {
      assert.equal(ack.type, "outcome.ack");
      assert.equal(ack.suggestion_id, suggestion.suggestion_id);
      assert.equal(ack.duplicate, false);
    }
    assert.notEqual(shown.outcome_id, accepted.outcome_id);

    const dumped = await dumpDatabase(["--suggestion", suggestion.suggestion_id]);
    assert.equal(dumped.suggestions.length, 1, JSON.stringify(dumped));
    const row = dumped.suggestions[0];
    assert.equal(row.kind, "completion");
    assert.equal(row.session_id, null);
    assert.equal(row.file_path, "m.py");
    assert.equal(row.proposed, suggestion.text);
    assert.equal(row.model, server!.modelName, "the model that served it is recorded");
    // No adapter was trained yet: the base model served it, both on the wire and in the row.
    assert.equal(suggestion.adapter ?? null, null);
    assert.equal(row.adapter_version, null);
    assert.ok(row.completion_token_ids.length > 0, JSON.stringify(row));
    assert.equal(row.completion_logprobs.length, row.completion_token_ids.length);
    for (const lp of row.completion_logprobs) assert.ok(Number.isFinite(lp) && lp <= 0, `logprob ${lp}`);
    assert.deepEqual(row.outcomes.map((o) => o.kind), ["shown", "accepted"]);
    assert.equal(row.outcomes[1].accepted_length, suggestion.text.length);
  } finally {
    conn.close();
  }
});

chatTest("a chat turn on the real model: every tool request answered, turn.done with a RunStatus, events stored", async () => {
  const workspace = tempDir("apprentice-real-ws-");
  const conn = await AgentConnection.open({ url: server!.wsUrl, token: server!.token, clientName: "apprentice-vscode-real-test" });
  let session: AgentSession | undefined;
  try {
    writeFileSync(join(workspace.path, "a.py"), "def add(a, b):\n    return a + b\n");
    // Count the agent's tool requests and the answers the core sends back on this connection.
    const requested: string[] = [];
    const answered: string[] = [];
    conn.onMessage((m: ServerMessage) => {
      if (m.type === "tool.request") requested.push(m.request_id);
    });
    const send = conn.send.bind(conn);
    conn.send = (msg: ClientMessage) => {
      if (msg.type === "tool.result") answered.push(msg.request_id);
      send(msg);
    };
    const reviewed: EditProposed[] = [];
    const host: EditorHost = {
      tools: new FsWorkspaceTools(workspace.path),
      reviewEdit: async (p) => {
        reviewed.push(p);
        return { outcome: "rejected", reason: REJECT_REASON };
      },
      approveCommand: async () => false,
    };
    session = await AgentSession.create(conn, host, { title: "real model", workspace: workspace.path });
    const events: SessionEvent[] = [];
    session.onEvent((e) => events.push(e));

    const started = Date.now();
    let cancelled = false;
    const budget = setTimeout(() => {
      cancelled = true;
      session!.cancel();
    }, TURN_BUDGET_MS);
    let overdue: NodeJS.Timeout | undefined;
    let done: TurnDone;
    try {
      done = await Promise.race([
        session.send("List the files in this folder and read a.py", { path: "a.py", language: "python" }),
        new Promise<never>((_, reject) => {
          overdue = setTimeout(
            () => reject(new Error(withLog(`no turn.done within ${TURN_BUDGET_MS + CANCEL_GRACE_MS} ms (cancel sent: ${cancelled})`))),
            TURN_BUDGET_MS + CANCEL_GRACE_MS,
          );
        }),
      ]);
    } finally {
      clearTimeout(budget);
      clearTimeout(overdue);
    }
    const stepCount = events.filter((e) => e.kind === "step").length;
    console.log(
      `turn in ${elapsed(started)}: status ${done.status}${cancelled ? " (cancelled by the test's budget)" : ""}, ` +
        `usage ${JSON.stringify(done.usage)}, ${stepCount} agent.step, ${requested.length} tool requests, ${reviewed.length} edits proposed`,
    );

    assert.ok(RUN_STATUSES.includes(done.status), withLog(done));
    if (!cancelled) assert.notEqual(done.status, "cancelled", "nothing but the budget cancels the turn");
    assert.ok((done.usage?.model_calls ?? 0) >= 1, withLog(done));
    assert.deepEqual([...answered].sort(), [...requested].sort(), "every tool.request got exactly one tool.result");
    const decided = events.filter((e) => e.kind === "edit_decided");
    assert.equal(decided.length, reviewed.length, "every proposal was answered");
    for (const e of decided) assert.ok(e.kind === "edit_decided" && e.ack && !e.ack.duplicate, JSON.stringify(e));

    const dumped = await dumpDatabase(["--session", session.id]);
    // The trajectory is stored: the run's start and end, the model's messages, and one tool
    // call and observation at least for every tool request the editor answered.
    const loopKinds = dumped.events.map((e) => e.loop_kind);
    assert.equal(loopKinds[0], "run_started", JSON.stringify(loopKinds));
    assert.equal(loopKinds[loopKinds.length - 1], "run_finished", JSON.stringify(loopKinds));
    assert.ok(loopKinds.includes("assistant"), JSON.stringify(loopKinds));
    // a.py, named in the task, is read once before the first step to be shown with the task
    // (agent_server/agent/task_files.py): that request has no tool_call of the model's.
    const shownReads = 1;
    assert.ok(loopKinds.filter((k) => k === "tool_call").length >= requested.length - shownReads, JSON.stringify(loopKinds));
    assert.ok(dumped.events.filter((e) => e.kind === "tool_result").length >= requested.length - shownReads, JSON.stringify(dumped.events));
    const seqs = dumped.events.map((e) => e.seq);
    assert.deepEqual(seqs, [...new Set(seqs)].sort((a, b) => a - b), "events in order, each seq once");
    // Each proposal the model made is stored with its rejection and the reason.
    const edits = dumped.suggestions.filter((s) => s.kind === "edit");
    assert.deepEqual(edits.map((s) => s.id).sort(), reviewed.map((p) => p.suggestion_id).sort());
    for (const s of edits) {
      const rejected = s.outcomes.filter((o) => o.kind === "rejected");
      assert.equal(rejected.length, 1, JSON.stringify(s.outcomes));
      assert.equal(rejected[0].reason, REJECT_REASON);
      assert.ok(s.completion_token_ids.length > 0 && s.completion_logprobs.length === s.completion_token_ids.length);
    }
  } finally {
    session?.dispose();
    conn.close();
    workspace.cleanup();
  }
});
