// The WebSocket protocol (docs/protocol.md) for the extension: the message types, generated
// from docs/protocol.schema.json into generated/protocol.ts (scripts/generateProtocol.mjs, run
// by every build), the validating parser for server messages (./validate) and the encoder for
// client messages. No `vscode` import: the core, its unit tests and the Node integration test
// use this file directly. Import protocol types from here, not from generated/.

import { randomUUID } from "node:crypto";
import type {
  ClientMessage,
  Diagnostic,
  EditOutcome,
  Error as ErrorMessage,
  ServerMessage,
  SessionCreate,
} from "../../generated/protocol";

export type {
  AgentStep,
  AnyMessage,
  AssistantDelta,
  Cancel,
  ClientMessage,
  CommandApprovalRequest,
  CommandApprovalResponse,
  CompletionRequest,
  CompletionSuggestion,
  Diagnostic,
  EditOutcome,
  EditProposed,
  EditorContext,
  Hello,
  Hunk,
  OutcomeAck,
  Ping,
  Pong,
  Position,
  Selection,
  ServerMessage,
  SessionInfo,
  SessionResume,
  SummaryMade,
  ToolError,
  ToolRequest,
  ToolResult,
  TranscriptEntry,
  TurnDone,
  Usage,
  UserMessage,
  Welcome,
} from "../../generated/protocol";
export { CLIENT_MESSAGE_TYPES, PROTOCOL_VERSION, SERVER_MESSAGE_TYPES } from "../../generated/protocol";
export { ProtocolViolation, parseServerMessage } from "./validate";

/** The `error` message (named so that it does not shadow the global Error). */
export type { ErrorMessage };
export type SessionMode = NonNullable<SessionCreate["mode"]>;
export type DiagnosticSeverity = NonNullable<Diagnostic["severity"]>;
/** What a person did with a suggestion: the protocol's outcome kinds (src/protocol/vocab.ts
 * names the subsets each part of the extension reports). */
export type OutcomeKind = EditOutcome["outcome"];
export type ServerMessageType = ServerMessage["type"];
export type ClientMessageType = ClientMessage["type"];

/** The frame for a client message (JSON text). */
export function encode(msg: ClientMessage): string {
  return JSON.stringify(msg);
}

/** A fresh id for `client_event_id` and request `id`s: 32 hex digits. */
export function newEventId(): string {
  return randomUUID().replace(/-/g, "");
}

/** A type guard for `AgentConnection.request`: `conn.request(msg, isMessage("session.info"))`. */
export function isMessage<K extends ServerMessageType>(
  type: K,
): (m: ServerMessage) => m is Extract<ServerMessage, { type: K }> {
  return (m: ServerMessage): m is Extract<ServerMessage, { type: K }> => m.type === type;
}
