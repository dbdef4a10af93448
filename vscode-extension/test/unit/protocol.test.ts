// Unit tests of src/protocol: every server message kind parses, malformed frames are refused
// with clear messages, encode round-trips, and the generated types and the validator follow
// docs/protocol.schema.json field by field.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import {
  CLIENT_MESSAGE_TYPES,
  PROTOCOL_VERSION,
  ProtocolViolation,
  SERVER_MESSAGE_TYPES,
  encode,
  isMessage,
  newEventId,
  parseServerMessage,
  type ClientMessage,
  type ServerMessage,
} from "../../src/protocol/messages";
import { EDITOR_REASON_PREFIX } from "../../src/protocol/vocab";
import { packageRoot } from "./helpers";

const SAMPLES: ServerMessage[] = [
  { type: "welcome", protocol_version: 1, server: "apprentice 0.1", model: "m", adapter: null, max_frame_bytes: 1048576 },
  {
    type: "session.info", id: "r1", session_id: "s1", mode: "interactive", title: "t", status: "idle",
    created_at: "2025-01-01T00:00:00Z", resumed: true, last_seq: 3,
    transcript: [{ seq: 0, kind: "message", role: "user", text: "hi" }],
  },
  { type: "assistant.delta", session_id: "s1", text: "Hel" },
  { type: "agent.step", session_id: "s1", tool: "read_file", args: { path: "a.py" }, observation: "x = 1" },
  { type: "tool.request", request_id: "q1", session_id: "s1", method: "read_file", params: { path: "a.py" } },
  { type: "completion.suggestion", suggestion_id: "c1", text: "foo()", adapter: "v3" },
  {
    type: "edit.proposed", session_id: "s1", suggestion_id: "e1", path: "a.py", diff: "--- a/a.py\n",
    hunks: [{ index: 0, header: "@@ -1 +1 @@", diff: "@@ -1 +1 @@\n-x = 1\n+x = 2\n" }],
  },
  { type: "outcome.ack", suggestion_id: "e1", client_event_id: "ce1", outcome_id: "o1", duplicate: false },
  { type: "command.approval.request", request_id: "q2", session_id: "s1", command: "pytest -q" },
  { type: "summary.made", session_id: "s1", summary: "so far", tokens_before: 900, tokens_after: null },
  { type: "turn.done", session_id: "s1", status: "finished", message: "Done", usage: { prompt_tokens: 5, completion_tokens: 2, model_calls: 1 } },
  { type: "error", code: "session_not_found", message: "No stored session", session_id: null },
  { type: "pong", id: "p" },
];

test("every server message kind has a sample and parses to itself", () => {
  assert.deepEqual(new Set(SAMPLES.map((s) => s.type)), new Set(SERVER_MESSAGE_TYPES));
  for (const sample of SAMPLES) {
    assert.deepEqual(parseServerMessage(JSON.stringify(sample)), sample, sample.type);
  }
});

test("optional fields may be absent, unknown fields are tolerated", () => {
  const m = parseServerMessage('{"type":"welcome","server":"s","model":"m","future_field":1}');
  assert.equal(m.type, "welcome");
  assert.equal(parseServerMessage('{"type":"turn.done","session_id":"s","status":"cancelled"}').type, "turn.done");
});

const BAD: Array<[string, RegExp]> = [
  ["not json", /not JSON/],
  ["[1,2]", /JSON array.*object with a 'type'/],
  ['"text"', /JSON string/],
  ['{"session_id":"s"}', /without a string 'type'/],
  ['{"type":"telepathy"}', /Unknown server message type 'telepathy'.*protocol version 1/],
  ['{"type":"toString"}', /Unknown server message type 'toString'/],
  ['{"type":"welcome","server":"s"}', /welcome: required field 'model' is missing/],
  ['{"type":"assistant.delta","session_id":"s","text":5}', /assistant.delta: field 'text' is integer; expected string/],
  ['{"type":"outcome.ack","suggestion_id":"e","client_event_id":"c","outcome_id":"o","duplicate":"no"}', /'duplicate' is string; expected boolean/],
  ['{"type":"edit.proposed","session_id":"s","suggestion_id":"e","path":"a","diff":"d","hunks":[{"index":"0","header":"h","diff":"d"}]}', /edit.proposed.hunks\[0\]: field 'index' is string; expected integer/],
  ['{"type":"edit.proposed","session_id":"s","suggestion_id":"e","path":"a","diff":"d","hunks":{}}', /'hunks' is object; expected array/],
  ['{"type":"session.info","session_id":"s","mode":"m","title":"t","status":"s","created_at":"c","last_seq":1.5}', /'last_seq' is number; expected integer/],
  ['{"type":"turn.done","session_id":"s","status":"finished","usage":{"prompt_tokens":"many"}}', /turn.done.usage: field 'prompt_tokens'/],
  ['{"type":"tool.request","request_id":"q","session_id":"s","method":"read_file","params":null}', /'params' is null; expected object/],
  ['{"type":"pong","id":7}', /'id' is integer; expected string or null/],
];

test("malformed frames are refused with a ProtocolViolation that says what is wrong", () => {
  for (const [frame, message] of BAD) {
    assert.throws(() => parseServerMessage(frame), (err: unknown) => {
      assert.ok(err instanceof ProtocolViolation, `${frame}: ${String(err)}`);
      assert.match((err as Error).message, message, frame);
      return true;
    });
  }
});

test("encode round-trips client messages", () => {
  const messages: ClientMessage[] = [
    { type: "hello", protocol_version: PROTOCOL_VERSION, client: "vscode-test" },
    { type: "user.message", id: "u1", session_id: "s", text: "fix it", context: { path: "a.py", selection: { start: { line: 0, character: 0 }, end: { line: 0, character: 3 }, text: "x =" }, diagnostics: [{ line: 0, message: "bad", severity: "warning" }] } },
    { type: "edit.outcome", suggestion_id: "e", outcome: "partially_accepted", client_event_id: newEventId(), accepted_hunks: [0, 2], reason: "no" },
    { type: "tool.result", request_id: "q", error: { code: "file_not_found", message: "gone" } },
  ];
  for (const m of messages) assert.deepEqual(JSON.parse(encode(m)), m);
});

test("newEventId gives distinct 32-hex ids; isMessage narrows", () => {
  const ids = new Set(Array.from({ length: 100 }, newEventId));
  assert.equal(ids.size, 100);
  for (const id of ids) assert.match(id, /^[0-9a-f]{32}$/);
  assert.equal(isMessage("pong")({ type: "pong" }), true);
  assert.equal(isMessage("pong")({ type: "welcome", server: "s", model: "m" }), false);
});

// ---- consistency with the server's JSON Schema ----------------------------------------

interface SchemaProp {
  type?: string;
  anyOf?: Array<{ type?: string; $ref?: string }>;
  $ref?: string;
  description?: string;
}

interface SchemaDef {
  properties: Record<string, SchemaProp>;
  required?: string[];
}

const schema = JSON.parse(readFileSync(join(packageRoot(), "..", "docs", "protocol.schema.json"), "utf8")) as {
  title: string;
  discriminator: { mapping: Record<string, string> };
  $defs: Record<string, SchemaDef>;
};

function defOf(type: string): SchemaDef {
  const ref = schema.discriminator.mapping[type];
  return schema.$defs[ref.replace("#/$defs/", "")];
}

/** The JSON kinds a property allows ("object" for a $ref). */
function kindsOf(prop: SchemaProp): string[] {
  return prop.anyOf ? prop.anyOf.map((a) => a.type ?? "object") : [prop.type ?? "object"];
}

function sampleOf(type: string): Record<string, unknown> {
  return { ...SAMPLES.find((s) => s.type === type)! };
}

test("every message type of the schema has a TS counterpart, and no more", () => {
  const schemaTypes = Object.keys(schema.discriminator.mapping).sort();
  const tsTypes = [...CLIENT_MESSAGE_TYPES, ...SERVER_MESSAGE_TYPES].sort();
  assert.deepEqual(tsTypes, schemaTypes);
  assert.equal(schema.title, `Apprentice WebSocket protocol v${PROTOCOL_VERSION}`);
});

test("every field of every server message is checked as the schema says", () => {
  for (const type of SERVER_MESSAGE_TYPES) {
    const def = defOf(type);
    for (const [name, prop] of Object.entries(def.properties)) {
      if (name === "type") continue;
      const kinds = kindsOf(prop);
      const required = (def.required ?? []).includes(name);
      // A value of a kind the schema does not allow is refused, naming the field.
      const wrong = kinds.includes("boolean") ? "text" : true;
      const broken = { ...sampleOf(type), [name]: wrong };
      assert.throws(() => parseServerMessage(JSON.stringify(broken)), (err: unknown) => {
        assert.ok(err instanceof ProtocolViolation, `${type}.${name}: ${String(err)}`);
        assert.match((err as Error).message, new RegExp(`^${type.replace(".", "\\.")}: field '${name}' is \\w+; expected`), `${type}.${name}`);
        return true;
      });
      // null passes exactly where the schema allows it.
      const nulled = JSON.stringify({ ...sampleOf(type), [name]: null });
      if (kinds.includes("null")) assert.equal(parseServerMessage(nulled).type, type, `${type}.${name}: nullable`);
      else assert.throws(() => parseServerMessage(nulled), /is null; expected/, `${type}.${name}: not nullable`);
      // An optional field may be left out.
      if (!required) {
        const without = sampleOf(type);
        delete without[name];
        assert.equal(parseServerMessage(JSON.stringify(without)).type, type, `${type}.${name}: optional`);
      }
    }
  }
});

test("the editor's reason prefix is the one the schema documents", () => {
  const reason = schema.$defs.EditOutcome.properties.reason.description ?? "";
  assert.ok(reason.includes(`'${EDITOR_REASON_PREFIX}'`), reason);
});

test("a message missing a required field of the schema is refused", () => {
  for (const sample of SAMPLES) {
    for (const field of defOf(sample.type).required ?? []) {
      if (field === "type") continue;
      const broken: Record<string, unknown> = { ...sample };
      delete broken[field];
      assert.throws(() => parseServerMessage(JSON.stringify(broken)), ProtocolViolation, `${sample.type} without ${field}`);
    }
  }
});
