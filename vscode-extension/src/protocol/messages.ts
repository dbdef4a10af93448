// The WebSocket protocol (docs/protocol.md, version 1) as TypeScript types, plus the
// validating parser for server messages and the encoder for client messages. No `vscode`
// import: the core, its unit tests and the Node integration test use this file directly.

import { randomUUID } from "node:crypto";

export const PROTOCOL_VERSION = 1;

// ---- shared objects -----------------------------------------------------------------------

export interface Position {
  line: number; // 0-based
  character: number; // 0-based, UTF-16 units (as LSP)
}

export interface Selection {
  start: Position;
  end: Position;
  text?: string;
}

export type DiagnosticSeverity = "error" | "warning" | "information" | "hint";

export interface Diagnostic {
  path?: string | null;
  line: number;
  severity?: DiagnosticSeverity;
  message: string;
  source?: string | null;
}

export interface EditorContext {
  path?: string | null; // open file, workspace-relative
  language?: string | null;
  selection?: Selection | null;
  diagnostics?: Diagnostic[];
}

export interface Hunk {
  index: number; // the index a partially_accepted outcome names
  header: string; // the @@ line
  diff: string; // the hunk as unified-diff text, header included
}

export interface Usage {
  prompt_tokens?: number;
  completion_tokens?: number;
  model_calls?: number;
}

export interface ToolError {
  code: string;
  message: string;
}

export interface TranscriptEntry {
  seq: number;
  kind: string;
  role?: string | null;
  text: string;
}

export type SessionMode = "interactive" | "autonomous";

export type OutcomeKind =
  | "accepted"
  | "rejected"
  | "partially_accepted"
  | "edited_after_accept"
  | "reverted"
  | "persisted"
  | "shown";

export type ToolMethod = "read_file" | "list_dir" | "search" | "write_file" | "run_command";

interface Base {
  id?: string | null; // echoed in every reply to this message
}

// ---- client -> server ---------------------------------------------------------------------

export interface Hello extends Base {
  type: "hello";
  protocol_version: number;
  client?: string;
}

export interface SessionCreate extends Base {
  type: "session.create";
  mode?: SessionMode;
  title?: string;
  workspace?: string;
}

export interface SessionResume extends Base {
  type: "session.resume";
  session_id: string;
}

export interface UserMessage extends Base {
  type: "user.message";
  session_id: string;
  text: string;
  context?: EditorContext;
}

export interface ToolResult extends Base {
  type: "tool.result";
  request_id: string;
  result?: Record<string, unknown> | null;
  error?: ToolError | null;
}

export interface CompletionRequest extends Base {
  type: "completion.request";
  path: string;
  language?: string;
  prefix: string;
  suffix?: string;
  session_id?: string | null;
  max_tokens?: number;
}

export interface EditOutcome extends Base {
  type: "edit.outcome";
  suggestion_id: string;
  outcome: OutcomeKind;
  client_event_id: string;
  client_time?: string | null;
  reason?: string | null;
  accepted_hunks?: number[] | null;
  accepted_length?: number | null;
  final_text?: string | null;
}

export interface CommandApprovalResponse extends Base {
  type: "command.approval.response";
  request_id: string;
  approved: boolean;
  reason?: string | null;
}

export interface Cancel extends Base {
  type: "cancel";
  session_id: string;
}

export interface Ping extends Base {
  type: "ping";
}

export type ClientMessage =
  | Hello
  | SessionCreate
  | SessionResume
  | UserMessage
  | ToolResult
  | CompletionRequest
  | EditOutcome
  | CommandApprovalResponse
  | Cancel
  | Ping;

// ---- server -> client ---------------------------------------------------------------------

export interface Welcome extends Base {
  type: "welcome";
  protocol_version?: number;
  server: string;
  model: string;
  adapter?: string | null;
  max_frame_bytes?: number;
}

export interface SessionInfo extends Base {
  type: "session.info";
  session_id: string;
  mode: string;
  title: string;
  status: string;
  created_at: string;
  resumed?: boolean;
  last_seq?: number;
  transcript?: TranscriptEntry[];
}

export interface AssistantDelta extends Base {
  type: "assistant.delta";
  session_id: string;
  text: string;
}

export interface AgentStep extends Base {
  type: "agent.step";
  session_id: string;
  tool: string;
  args?: Record<string, unknown>;
  observation?: string;
}

export interface ToolRequest extends Base {
  type: "tool.request";
  request_id: string;
  session_id: string;
  method: string; // a ToolMethod; an unknown one is answered with an error
  params?: Record<string, unknown>;
}

export interface CompletionSuggestion extends Base {
  type: "completion.suggestion";
  suggestion_id: string;
  text: string;
  adapter?: string | null;
}

export interface EditProposed extends Base {
  type: "edit.proposed";
  session_id: string;
  suggestion_id: string;
  path: string;
  diff: string;
  hunks: Hunk[];
}

export interface OutcomeAck extends Base {
  type: "outcome.ack";
  suggestion_id: string;
  client_event_id: string;
  outcome_id: string;
  duplicate: boolean;
}

export interface CommandApprovalRequest extends Base {
  type: "command.approval.request";
  request_id: string;
  session_id: string;
  command: string;
}

export interface SummaryMade extends Base {
  type: "summary.made";
  session_id: string;
  summary: string;
  tokens_before?: number | null;
  tokens_after?: number | null;
}

/** finished | step_limit | time_limit | too_many_errors | cancelled | model_error |
 * context_overflow, or error (a server fault). */
export interface TurnDone extends Base {
  type: "turn.done";
  session_id: string;
  status: string;
  message?: string;
  usage?: Usage;
}

export interface ErrorMessage extends Base {
  type: "error";
  code: string;
  message: string;
  session_id?: string | null;
}

export interface Pong extends Base {
  type: "pong";
}

export type ServerMessage =
  | Welcome
  | SessionInfo
  | AssistantDelta
  | AgentStep
  | ToolRequest
  | CompletionSuggestion
  | EditProposed
  | OutcomeAck
  | CommandApprovalRequest
  | SummaryMade
  | TurnDone
  | ErrorMessage
  | Pong;

export type ServerMessageType = ServerMessage["type"];
export type ClientMessageType = ClientMessage["type"];

export const CLIENT_MESSAGE_TYPES: readonly ClientMessageType[] = [
  "hello",
  "session.create",
  "session.resume",
  "user.message",
  "tool.result",
  "completion.request",
  "edit.outcome",
  "command.approval.response",
  "cancel",
  "ping",
];

export { SERVER_FIELDS, SERVER_MESSAGE_TYPES, ProtocolViolation, parseServerMessage } from "./validate";

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
