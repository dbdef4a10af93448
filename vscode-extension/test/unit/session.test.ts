// Unit tests of AgentConnection and AgentSession against an in-process `ws` server that
// plays the agent server's side: hello/welcome, request ids and error replies, a handshake
// that never completes, and a turn in which a tool request arrives while the person is
// still reviewing an edit (it must be answered without waiting for the review).

import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";
import { WebSocketServer, type WebSocket } from "ws";
import { AgentConnection } from "../../src/core/connection";
import { ConnectionFailed, RequestTimeout, ServerError } from "../../src/core/errors";
import { AgentSession, type EditDecision, type EditorHost } from "../../src/core/session";
import { FsWorkspaceTools } from "../../src/core/tools";
import { isMessage } from "../../src/protocol/messages";
import { tempDir } from "./helpers";

type Frame = Record<string, unknown> & { type: string };
let wss: WebSocketServer;
let url: string;
let onFrame: (ws: WebSocket, m: Frame) => void = () => undefined;
const received: Frame[] = [];

before(async () => {
  wss = new WebSocketServer({ port: 0, host: "127.0.0.1" });
  await new Promise((r) => wss.once("listening", r));
  url = `ws://127.0.0.1:${(wss.address() as AddressInfo).port}/v1/ws`;
  wss.on("connection", (ws, req) => {
    if (req.headers.authorization !== "Bearer t0ken") return ws.close(4003, "bad token");
    ws.on("message", (data) => {
      const m = JSON.parse(data.toString()) as Frame;
      received.push(m);
      if (m.type === "hello") return ws.send(JSON.stringify({ type: "welcome", server: "fake", model: "m" }));
      onFrame(ws, m);
    });
  });
});

after(() => new Promise<void>((r) => wss.close(() => r())));

const send = (ws: WebSocket, m: Record<string, unknown>) => ws.send(JSON.stringify(m));

test("request: resolves with the accepted reply of its id, rejects on an error reply or a timeout", async () => {
  onFrame = (ws, m) => {
    if (m.type === "session.create") {
      send(ws, { type: "pong", id: "other" }); // another id: ignored by this request
      send(ws, { type: "session.info", id: m.id, session_id: "s1", mode: "interactive", title: "t", status: "idle", created_at: "now" });
    }
    if (m.type === "session.resume") send(ws, { type: "error", id: m.id, code: "session_not_found", message: "No stored session has this id." });
  };
  const conn = await AgentConnection.open({ url, token: "t0ken", clientName: "unit" });
  try {
    assert.equal(conn.welcome.server, "fake");
    assert.deepEqual(received.find((m) => m.type === "hello"), { type: "hello", protocol_version: 1, client: "unit" });
    const info = await conn.request({ type: "session.create" }, isMessage("session.info"));
    assert.equal(info.session_id, "s1");
    await assert.rejects(conn.request({ type: "session.resume", session_id: "x" }, isMessage("session.info")), (e: unknown) => e instanceof ServerError && e.code === "session_not_found");
    await assert.rejects(conn.request({ type: "ping" }, isMessage("pong"), 100), RequestTimeout);
  } finally {
    conn.close();
  }
});

test("invalid frames are reported as violations and not delivered", async () => {
  onFrame = (ws, m) => {
    if (m.type === "ping") {
      ws.send("{not json");
      send(ws, { type: "assistant.delta", session_id: "s" }); // text missing
      send(ws, { type: "pong", id: m.id });
    }
  };
  const conn = await AgentConnection.open({ url, token: "t0ken", clientName: "unit" });
  const violations: string[] = [];
  const delivered: string[] = [];
  conn.onProtocolViolation((v) => violations.push(v.message));
  conn.onMessage((m) => delivered.push(m.type));
  await conn.request({ type: "ping" }, isMessage("pong"));
  conn.close();
  assert.deepEqual(delivered, ["pong"]);
  assert.equal(violations.length, 2);
  assert.match(violations[1], /required field 'text' is missing/);
});

test("a refused token closes before welcome; a silent server times out", async () => {
  await assert.rejects(AgentConnection.open({ url, token: "nope", clientName: "unit" }), (e: unknown) => e instanceof ConnectionFailed && e.kind === "closed");
  const silent = new WebSocketServer({ port: 0, host: "127.0.0.1" });
  await new Promise((r) => silent.once("listening", r));
  try {
    const port = (silent.address() as AddressInfo).port;
    await assert.rejects(
      AgentConnection.open({ url: `ws://127.0.0.1:${port}/v1/ws`, clientName: "unit", timeoutMs: 300 }),
      (e: unknown) => e instanceof ConnectionFailed && e.kind === "timeout",
    );
  } finally {
    for (const c of silent.clients) c.terminate();
    await new Promise((r) => silent.close(r));
  }
});

test("a tool request is answered while the person is still reviewing an edit", { timeout: 10_000 }, async () => {
  const ws = tempDir();
  const results: Frame[] = [];
  let releaseReview!: (d: EditDecision) => void;
  onFrame = (sock, m) => {
    if (m.type === "session.create") send(sock, { type: "session.info", id: m.id, session_id: "s1", mode: "interactive", title: "t", status: "idle", created_at: "now" });
    if (m.type === "user.message") {
      send(sock, { type: "edit.proposed", id: m.id, session_id: "s1", suggestion_id: "e1", path: "a.py", diff: "d", hunks: [] });
      send(sock, { type: "tool.request", id: m.id, request_id: "q1", session_id: "s1", method: "list_dir", params: { path: "." } });
      send(sock, { type: "command.approval.request", id: m.id, request_id: "q2", session_id: "s1", command: "rm -rf /" });
      send(sock, { type: "tool.request", id: m.id, request_id: "q3", session_id: "s1", method: "format_disk", params: {} });
      (sock as WebSocket & { turnId?: unknown }).turnId = m.id;
    }
    if (m.type === "tool.result" || m.type === "command.approval.response") {
      results.push(m);
      if (results.length === 3) releaseReview({ outcome: "rejected", reason: "later" });
    }
    if (m.type === "edit.outcome") {
      send(sock, { type: "outcome.ack", id: m.id, suggestion_id: m.suggestion_id, client_event_id: m.client_event_id, outcome_id: "o1", duplicate: false });
      send(sock, { type: "turn.done", id: (sock as WebSocket & { turnId?: unknown }).turnId, session_id: "s1", status: "finished" });
    }
  };
  const host: EditorHost = {
    tools: new FsWorkspaceTools(ws.path),
    reviewEdit: () => new Promise((resolve) => (releaseReview = resolve)),
    approveCommand: async () => false,
  };
  const conn = await AgentConnection.open({ url, token: "t0ken", clientName: "unit" });
  try {
    const session = await AgentSession.create(conn, host);
    const kinds: string[] = [];
    session.onEvent((e) => kinds.push(e.kind));
    const done = await session.send("go");
    assert.equal(done.status, "finished");
    assert.deepEqual(results.map((r) => r.request_id).sort(), ["q1", "q2", "q3"]);
    assert.deepEqual(results.find((r) => r.request_id === "q1")?.result, { entries: [], truncated: false });
    assert.equal((results.find((r) => r.request_id === "q3")?.error as { code: string }).code, "unknown_method");
    assert.equal(results.find((r) => r.request_id === "q2")?.approved, false);
    const outcome = received.find((m) => m.type === "edit.outcome")!;
    assert.equal(outcome.outcome, "rejected");
    assert.equal(outcome.reason, "later");
    assert.match(String(outcome.client_event_id), /^[0-9a-f]{32}$/);
    await new Promise((r) => setImmediate(r)); // edit_decided follows the ack's promise
    assert.deepEqual([...kinds].sort(), ["command", "done", "edit", "edit_decided"]);
    assert.equal(kinds[0], "edit");
  } finally {
    conn.close();
    ws.cleanup();
  }
});
