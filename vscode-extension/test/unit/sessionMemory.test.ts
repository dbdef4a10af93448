// Unit tests of the chat's session across editor restarts (core/sessionMemory.ts,
// core/chatSessions.ts) against an in-process `ws` server that keeps sessions as the agent
// server does: session.create makes one, session.resume answers its transcript or
// session_not_found. The workspace state is a Map shared by the "windows", as VS Code keeps
// a workspace's Memento on disk across restarts. A restarted window must resume the
// remembered session on connect (never create one), a session the server no longer has must
// be replaced with a notice, and a resume with no answer must keep the id.

import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
import { after, before, beforeEach, test } from "node:test";
import { WebSocketServer, type WebSocket } from "ws";
import { ChatSessions, type ChatOpened } from "../../src/core/chatSessions";
import { AgentConnection } from "../../src/core/connection";
import { ConnectionFailed } from "../../src/core/errors";
import type { EditorHost } from "../../src/core/session";
import { SESSION_ID_KEY, SessionMemory, transcriptMessages, type SessionStore } from "../../src/core/sessionMemory";
import { FsWorkspaceTools } from "../../src/core/tools";
import type { TranscriptEntry } from "../../src/protocol/messages";
import { tempDir } from "./helpers";

type Frame = Record<string, unknown> & { type: string };
const TRANSCRIPT: TranscriptEntry[] = [
  { seq: 1, kind: "task", role: "user", text: "Find the marker." },
  { seq: 3, kind: "tool_call", role: "assistant", text: "read_file {'path': 'notes.py'}" },
  { seq: 4, kind: "observation", role: "tool", text: 'MARKER = "kestrel"' },
  { seq: 5, kind: "tool_call", role: "assistant", text: "finish {'message': 'kestrel'}" },
  { seq: 6, kind: "status", text: "finished: kestrel" },
];

let wss: WebSocketServer;
let url: string;
const sessions = new Map<string, TranscriptEntry[]>(); // what the server has stored
let frames: Frame[] = []; // every client frame but hello, in order
let onResume: (ws: WebSocket, m: Frame) => boolean = () => false; // true: handled here

before(async () => {
  wss = new WebSocketServer({ port: 0, host: "127.0.0.1" });
  await new Promise((r) => wss.once("listening", r));
  url = `ws://127.0.0.1:${(wss.address() as AddressInfo).port}/v1/ws`;
  wss.on("connection", (ws) => {
    ws.on("message", (data) => {
      const m = JSON.parse(data.toString()) as Frame;
      if (m.type === "hello") return send(ws, { type: "welcome", server: "fake", model: "m" });
      frames.push(m);
      const info = (id: string, resumed: boolean) => ({
        type: "session.info", id: m.id, session_id: id, mode: "interactive", title: String(m.title ?? ""),
        status: "active", created_at: "2025-01-01T00:00:00Z", resumed, transcript: resumed ? sessions.get(id) : [],
      }); // prettier-ignore
      if (m.type === "session.create") {
        const id = `s${sessions.size + 1}-0123456789`;
        sessions.set(id, TRANSCRIPT);
        send(ws, info(id, false));
      }
      if (m.type === "session.resume" && !onResume(ws, m)) {
        const id = String(m.session_id);
        if (sessions.has(id)) send(ws, info(id, true));
        else send(ws, { type: "error", id: m.id, code: "session_not_found", message: "No stored session has this id." });
      }
    });
  });
});

after(() => new Promise<void>((r) => wss.close(() => r())));

beforeEach(() => {
  frames = [];
  onResume = () => false;
});

const send = (ws: WebSocket, m: Record<string, unknown>) => ws.send(JSON.stringify(m));

/** workspaceState as the extension sees it: a Memento, kept on disk across restarts. */
class MapStore implements SessionStore {
  readonly map = new Map<string, unknown>();
  get<T>(key: string): T | undefined {
    return this.map.get(key) as T | undefined;
  }
  async update(key: string, value: unknown): Promise<void> {
    if (value === undefined) this.map.delete(key);
    else this.map.set(key, value);
  }
}

const work = tempDir();
after(() => work.cleanup());
const host: EditorHost = { tools: new FsWorkspaceTools(work.path), reviewEdit: async () => ({ outcome: "rejected" }), approveCommand: async () => false };

/** One editor window's chat: its ChatSessions on the shared workspace state. */
function window(store: SessionStore) {
  const opened: ChatOpened[] = [];
  const chat = new ChatSessions(new SessionMemory(store), host, (text) => ({ mode: "interactive", title: text }), (o) => {
    opened.push(o);
    return () => undefined;
  });
  return { chat, opened };
}

const connect = () => AgentConnection.open({ url, token: "t", clientName: "unit" });
const types = () => frames.map((f) => f.type);

test("an editor restart resumes the remembered session on connect and creates none", async () => {
  const store = new MapStore();
  const first = window(store);
  const conn1 = await connect();
  assert.equal(await first.chat.connected(conn1), undefined, "nothing remembered: no session made at startup");
  assert.deepEqual(types(), []);
  const made = await first.chat.open(conn1, "find the marker");
  assert.deepEqual(types(), ["session.create"]);
  assert.equal(frames[0].title, "find the marker");
  assert.equal(store.get(SESSION_ID_KEY), made.id);
  first.chat.dispose();
  conn1.close();

  frames = [];
  const second = window(store); // a new extension host: only the workspace state is left
  const conn2 = await connect();
  const resumed = await second.chat.connected(conn2);
  assert.deepEqual(types(), ["session.resume"]);
  assert.equal(frames[0].session_id, made.id);
  assert.equal(resumed?.id, made.id);
  assert.deepEqual(second.opened.map((o) => [o.resumed, o.showHistory, o.notice]), [[true, true, undefined]]);
  assert.deepEqual(resumed?.info.transcript, TRANSCRIPT);
  assert.equal(await second.chat.open(conn2, "and again?"), resumed, "the first message uses it");
  assert.deepEqual(types(), ["session.resume"]);

  // A reconnect in the same window resumes it again; its history is on screen already.
  conn2.close();
  assert.equal(second.chat.lost(conn2), true);
  assert.equal(second.chat.current, undefined);
  const conn3 = await connect();
  assert.equal((await second.chat.connected(conn3))?.id, made.id);
  assert.deepEqual(types(), ["session.resume", "session.resume"]);
  assert.deepEqual(second.opened.map((o) => o.showHistory), [true, false]);
  conn3.close();
});

test("a session the server no longer has is replaced by a new one, and the person is told", async () => {
  const store = new MapStore();
  await store.update(SESSION_ID_KEY, "gone-0123456789");
  const { chat, opened } = window(store);
  const conn = await connect();
  try {
    const session = await chat.connected(conn);
    assert.deepEqual(types(), ["session.resume", "session.create"]);
    assert.equal(frames[0].session_id, "gone-0123456789");
    assert.equal(store.get(SESSION_ID_KEY), session?.id);
    assert.notEqual(session?.id, "gone-0123456789");
    assert.equal(opened.length, 1);
    assert.equal(opened[0].resumed, false);
    assert.equal(opened[0].showHistory, false);
    assert.match(opened[0].notice ?? "", /previous chat session \(gone-012\) is not on this server any more.*new session/);
  } finally {
    conn.close();
  }
});

test("a resume that gets no answer keeps the remembered id and creates nothing", async () => {
  const store = new MapStore();
  await store.update(SESSION_ID_KEY, "s-kept-0123456789");
  onResume = (ws) => (ws.close(1011, "server died"), true);
  const { chat, opened } = window(store);
  const conn = await connect();
  await assert.rejects(chat.connected(conn), (e: unknown) => e instanceof ConnectionFailed && e.kind === "closed");
  assert.deepEqual(types(), ["session.resume"]);
  assert.equal(store.get(SESSION_ID_KEY), "s-kept-0123456789", "the next connection tries it again");
  assert.deepEqual(opened, []);
});

test("a connect and a first message share one resume; New session meanwhile lets it go", async () => {
  const store = new MapStore();
  const id = "s-shared-0123456789";
  sessions.set(id, TRANSCRIPT);
  await store.update(SESSION_ID_KEY, id);
  let release!: () => void;
  onResume = (ws, m) => {
    release = () => send(ws, { type: "session.info", id: m.id, session_id: id, mode: "interactive", title: "", status: "active", created_at: "now", resumed: true });
    return true;
  };
  const { chat, opened } = window(store);
  const conn = await connect();
  try {
    const both = Promise.all([chat.connected(conn), chat.open(conn, "hi")]);
    while (!release) await new Promise((r) => setTimeout(r, 5));
    release();
    const [a, b] = await both;
    assert.equal(a, b);
    assert.deepEqual(types(), ["session.resume"]);

    // New session while a resume is on its way: the resumed session is not the chat's.
    await chat.reset();
    release = undefined as unknown as () => void;
    const pending = chat.open(conn, "x"); // nothing remembered now: a create
    assert.equal(store.get(SESSION_ID_KEY), undefined);
    await pending;
    assert.deepEqual(types(), ["session.resume", "session.create"]);

    await store.update(SESSION_ID_KEY, id);
    chat.lost(conn); // as after a disconnect: the next open resumes
    const late = chat.open(conn, "");
    while (!release) await new Promise((r) => setTimeout(r, 5));
    await chat.reset();
    release();
    await assert.rejects(late, /new chat session was started meanwhile/);
    assert.equal(chat.current, undefined);
    assert.equal(store.get(SESSION_ID_KEY), undefined, "New session's choice stands");
    assert.equal(opened.length, 2); // the shared resume and the create; not the late one
  } finally {
    conn.close();
  }
});

test("transcriptMessages: the task, each tool step with what it returned, later messages, the end", () => {
  const entries: TranscriptEntry[] = [
    { seq: 2, kind: "summary", text: "SUMMARY: read a.py" },
    ...TRANSCRIPT.slice(1),
    { seq: 7, kind: "observation", role: "user", text: "New message from the user:\nand again?" },
    { seq: 8, kind: "tool_call", role: "assistant", text: "list_dir {'path': '.'}" },
    { seq: 9, kind: "status", text: "cancelled" },
  ];
  assert.deepEqual(transcriptMessages([TRANSCRIPT[0], ...entries]), [
    { type: "user", text: "Find the marker." },
    { type: "summary", summary: "SUMMARY: read a.py" },
    { type: "step", tool: "read_file", observation: 'MARKER = "kestrel"' },
    { type: "done", status: "finished", message: "kestrel" },
    { type: "user", text: "and again?" },
    { type: "step", tool: "list_dir" },
    { type: "done", status: "cancelled" },
  ]);
  assert.deepEqual(transcriptMessages([]), []);
});
