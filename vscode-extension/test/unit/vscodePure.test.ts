// Unit tests of the VS Code layer's pure parts, kept in vscode-free core modules: the chat
// webview's messages (untrusted input parsed, card buttons mapped to commands, transcript
// replay), the server URL checks behind auto-start, reconnect backoff and token redaction.

import assert from "node:assert/strict";
import { test } from "node:test";
import { Backoff } from "../../src/core/backoff";
import { Transcript, cardCommand, parseFromWebview } from "../../src/core/chatMessages";
import { ConnectionFailed } from "../../src/core/errors";
import { Redactor, describeError } from "../../src/core/redact";
import { healthUrl, isLoopbackUrl, serveArgs } from "../../src/core/serverUrl";

test("parseFromWebview accepts the known messages and drops anything malformed", () => {
  assert.deepEqual(parseFromWebview({ type: "send", text: "hi" }), { type: "send", text: "hi" });
  assert.deepEqual(parseFromWebview({ type: "ready", extra: 1 }), { type: "ready" });
  assert.deepEqual(parseFromWebview({ type: "acceptHunk", suggestionId: "s", index: 2 }), { type: "acceptHunk", suggestionId: "s", index: 2 });
  assert.deepEqual(parseFromWebview({ type: "showDiff", suggestionId: "s" }), { type: "showDiff", suggestionId: "s" });
  for (const bad of [
    null,
    "send",
    42,
    { type: "send" },
    { type: "send", text: 5 },
    { type: "acceptEdit" },
    { type: "acceptEdit", suggestionId: 7 },
    { type: "rejectHunk", suggestionId: "s", index: -1 },
    { type: "rejectHunk", suggestionId: "s", index: 1.5 },
    { type: "acceptHunk", suggestionId: "s", index: "1" },
    { type: "runShell", command: "rm -rf /" },
  ]) {
    assert.equal(parseFromWebview(bad), undefined, JSON.stringify(bad));
  }
});

test("cardCommand: each card button is the same command as the CodeLens and keys", () => {
  assert.deepEqual(cardCommand({ type: "acceptEdit", suggestionId: "s" }), { command: "apprentice.acceptEdit", args: ["s"] });
  assert.deepEqual(cardCommand({ type: "rejectEdit", suggestionId: "s" }), { command: "apprentice.rejectEdit", args: ["s"] });
  assert.deepEqual(cardCommand({ type: "acceptHunk", suggestionId: "s", index: 0 }), { command: "apprentice.acceptHunk", args: ["s", 0] });
  assert.deepEqual(cardCommand({ type: "rejectHunk", suggestionId: "s", index: 3 }), { command: "apprentice.rejectHunk", args: ["s", 3] });
  assert.deepEqual(cardCommand({ type: "showDiff", suggestionId: "s" }), { command: "apprentice.showDiff", args: ["s"] });
  assert.equal(cardCommand({ type: "send", text: "x" }), undefined);
  assert.equal(cardCommand({ type: "newSession" }), undefined);
});

test("Transcript: deltas merge, state messages are not history, reset clears, notices are kept in order", () => {
  const t = new Transcript();
  t.add({ type: "user", text: "q" });
  t.add({ type: "delta", text: "a" });
  t.add({ type: "delta", text: "b" });
  t.add({ type: "busy", busy: true });
  t.add({ type: "connection", state: "connected", text: "c" });
  t.add({ type: "edit", suggestionId: "s", path: "a.py", diff: "d", hunks: [] });
  t.add({ type: "editNotice", suggestionId: "s", text: "a.py changed" });
  assert.deepEqual(t.messages, [
    { type: "user", text: "q" },
    { type: "delta", text: "ab" },
    { type: "edit", suggestionId: "s", path: "a.py", diff: "d", hunks: [] },
    { type: "editNotice", suggestionId: "s", text: "a.py changed" },
  ]);
  t.add({ type: "reset" });
  assert.deepEqual(t.messages, []);
  for (let i = 0; i < 2100; i++) t.add({ type: "info", text: String(i) });
  assert.equal(t.messages.length, 2000);
  assert.deepEqual(t.messages[0], { type: "info", text: "100" }, "the oldest are dropped");
});

test("isLoopbackUrl: only this machine's addresses may be auto-started", () => {
  for (const yes of ["ws://127.0.0.1:8765/v1/ws", "ws://localhost:1/x", "wss://[::1]:9/v1/ws", "ws://127.1.2.3/v1/ws"]) assert.ok(isLoopbackUrl(yes), yes);
  for (const no of ["ws://10.0.0.1:8765/v1/ws", "ws://example.com/v1/ws", "ws://127.0.0.1.evil.com/v1/ws", "ws://localhost.evil.com/", "not a url", "ws://[::2]/"]) {
    assert.equal(isLoopbackUrl(no), false, no);
  }
});

test("healthUrl and serveArgs follow the WebSocket URL", () => {
  assert.equal(healthUrl("ws://127.0.0.1:8765/v1/ws?x=1"), "http://127.0.0.1:8765/healthz");
  assert.equal(healthUrl("wss://[::1]:9443/v1/ws"), "https://[::1]:9443/healthz");
  assert.deepEqual(serveArgs("ws://127.0.0.1:8765/v1/ws"), ["serve", "--host", "127.0.0.1", "--port", "8765"]);
  assert.deepEqual(serveArgs("ws://[::1]/v1/ws"), ["serve", "--host", "::1", "--port", "80"]);
  assert.deepEqual(serveArgs("wss://localhost/v1/ws"), ["serve", "--host", "localhost", "--port", "443"]);
  assert.throws(() => serveArgs("nope"));
});

test("Backoff doubles from the first delay up to the cap and starts over on reset", () => {
  const b = new Backoff(1000, 30_000);
  assert.deepEqual([1, 2, 3, 4, 5, 6, 7].map(() => b.next()), [1000, 2000, 4000, 8000, 16000, 30000, 30000]);
  b.reset();
  assert.equal(b.next(), 1000);
  assert.throws(() => new Backoff(0, 10), RangeError);
  assert.throws(() => new Backoff(10, 5), RangeError);
});

test("Redactor masks registered secrets (not short ones); describeError names kinds and codes", () => {
  const r = new Redactor();
  r.add("tok-0123456789");
  r.add("short");
  r.add(undefined);
  assert.equal(r.mask("Bearer tok-0123456789 and tok-0123456789"), "Bearer *** and ***");
  assert.equal(r.mask("a short word"), "a short word");
  assert.equal(describeError(new ConnectionFailed("unauthorized", "refused")), "refused (unauthorized)");
  assert.equal(describeError(Object.assign(new Error("gone"), { code: "ENOENT" })), "gone (ENOENT)");
  assert.equal(describeError("plain"), "plain");
});
