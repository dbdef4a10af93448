// Validation of server messages: a field table per server message type (checked against
// docs/protocol.schema.json by test/unit/protocol.test.ts) and `parseServerMessage`, which
// turns a frame into a typed ServerMessage or throws ProtocolViolation saying what is wrong.
// Unknown fields are tolerated (a newer server may add some); missing or mistyped ones are not.

import type { ServerMessage, ServerMessageType } from "./messages";

/** A frame that is not a valid server message of protocol version 1. */
export class ProtocolViolation extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ProtocolViolation";
  }
}

type Kind = "string" | "integer" | "boolean" | "object" | "array";

export interface FieldSpec {
  kind: Kind;
  required?: boolean;
  nullable?: boolean;
  /** For arrays: the fields each element (an object) must have, or "integer". */
  items?: Record<string, FieldSpec> | "integer";
  /** For objects: their own fields. */
  fields?: Record<string, FieldSpec>;
}

const str: FieldSpec = { kind: "string", required: true };
const optStr: FieldSpec = { kind: "string" };
const nullStr: FieldSpec = { kind: "string", nullable: true };
const optInt: FieldSpec = { kind: "integer" };
const nullInt: FieldSpec = { kind: "integer", nullable: true };

const HUNK: Record<string, FieldSpec> = {
  index: { kind: "integer", required: true },
  header: str,
  diff: str,
};
const TRANSCRIPT_ENTRY: Record<string, FieldSpec> = {
  seq: { kind: "integer", required: true },
  kind: str,
  role: nullStr,
  text: str,
};
const USAGE: Record<string, FieldSpec> = {
  prompt_tokens: optInt,
  completion_tokens: optInt,
  model_calls: optInt,
};

/** Every server message type with its fields besides `type` and `id`. */
export const SERVER_FIELDS: Record<ServerMessageType, Record<string, FieldSpec>> = {
  welcome: {
    protocol_version: optInt,
    server: str,
    model: str,
    adapter: nullStr,
    max_frame_bytes: optInt,
  },
  "session.info": {
    session_id: str,
    mode: str,
    title: str,
    status: str,
    created_at: str,
    resumed: { kind: "boolean" },
    last_seq: optInt,
    transcript: { kind: "array", items: TRANSCRIPT_ENTRY },
  },
  "assistant.delta": { session_id: str, text: str },
  "agent.step": {
    session_id: str,
    tool: str,
    args: { kind: "object" },
    observation: optStr,
  },
  "tool.request": {
    request_id: str,
    session_id: str,
    method: str,
    params: { kind: "object" },
  },
  "completion.suggestion": { suggestion_id: str, text: str, adapter: nullStr },
  "edit.proposed": {
    session_id: str,
    suggestion_id: str,
    path: str,
    diff: str,
    hunks: { kind: "array", required: true, items: HUNK },
  },
  "outcome.ack": {
    suggestion_id: str,
    client_event_id: str,
    outcome_id: str,
    duplicate: { kind: "boolean", required: true },
  },
  "command.approval.request": { request_id: str, session_id: str, command: str },
  "summary.made": {
    session_id: str,
    summary: str,
    tokens_before: nullInt,
    tokens_after: nullInt,
  },
  "turn.done": {
    session_id: str,
    status: str,
    message: optStr,
    usage: { kind: "object", fields: USAGE },
  },
  error: { code: str, message: str, session_id: nullStr },
  pong: {},
};

export const SERVER_MESSAGE_TYPES = Object.keys(SERVER_FIELDS) as ServerMessageType[];

function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value;
}

function checkFields(obj: Record<string, unknown>, fields: Record<string, FieldSpec>, where: string) {
  for (const [name, spec] of Object.entries(fields)) {
    const value = obj[name];
    if (value === undefined) {
      if (spec.required) throw new ProtocolViolation(`${where}: required field '${name}' is missing.`);
      continue;
    }
    if (value === null) {
      if (spec.nullable) continue;
      throw new ProtocolViolation(`${where}: field '${name}' is null; expected ${spec.kind}.`);
    }
    const actual = kindOf(value);
    if (actual !== spec.kind) {
      throw new ProtocolViolation(`${where}: field '${name}' is ${actual}; expected ${spec.kind}.`);
    }
    if (spec.kind === "object" && spec.fields) {
      checkFields(value as Record<string, unknown>, spec.fields, `${where}.${name}`);
    }
    if (spec.kind === "array" && spec.items) {
      (value as unknown[]).forEach((item, i) => {
        const at = `${where}.${name}[${i}]`;
        if (spec.items === "integer") {
          if (kindOf(item) !== "integer") throw new ProtocolViolation(`${at} is ${kindOf(item)}; expected integer.`);
        } else {
          if (kindOf(item) !== "object") throw new ProtocolViolation(`${at} is ${kindOf(item)}; expected object.`);
          checkFields(item as Record<string, unknown>, spec.items as Record<string, FieldSpec>, at);
        }
      });
    }
  }
}

/** Parse and validate one server frame. Throws ProtocolViolation with a clear message. */
export function parseServerMessage(text: string): ServerMessage {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    const shown = text.length > 80 ? `${text.slice(0, 80)}...` : text;
    throw new ProtocolViolation(`The server sent a frame that is not JSON (${(err as Error).message}): ${shown}`);
  }
  if (kindOf(data) !== "object") {
    throw new ProtocolViolation(`The server sent a JSON ${kindOf(data)}; every message is an object with a 'type'.`);
  }
  const obj = data as Record<string, unknown>;
  if (typeof obj.type !== "string") {
    throw new ProtocolViolation("The server sent a message without a string 'type'.");
  }
  const fields = SERVER_FIELDS[obj.type as ServerMessageType];
  if (!Object.prototype.hasOwnProperty.call(SERVER_FIELDS, obj.type) || !fields) {
    throw new ProtocolViolation(
      `Unknown server message type '${obj.type}'; this extension speaks protocol version 1 ` +
        `(known: ${SERVER_MESSAGE_TYPES.join(", ")}).`,
    );
  }
  if (obj.id !== undefined && obj.id !== null && typeof obj.id !== "string") {
    throw new ProtocolViolation(`${obj.type}: field 'id' is ${kindOf(obj.id)}; expected string or null.`);
  }
  checkFields(obj, fields, obj.type);
  return obj as unknown as ServerMessage;
}
