// The types an AgentSession (session.ts) shares with its host, the editor: what the editor
// provides, what the person decided about an edit (decision.ts), and the events the session
// emits.

import type { EditDecision } from "./decision";
import type { OutcomeTracker } from "./outcomes";
import type { WorkspaceTools } from "./toolTypes";
import type {
  AgentStep,
  AssistantDelta,
  CommandApprovalRequest,
  EditProposed,
  ErrorMessage,
  OutcomeAck,
  SessionMode,
  SummaryMade,
  TurnDone,
} from "../protocol/messages";

export type { EditDecision };

/** Tools that know the editor's open documents may also say which hold unsaved changes. */
export interface UnsavedTexts {
  /** The text of `path`'s open document when it has unsaved changes; undefined otherwise. */
  unsavedText(path: string): Promise<string | undefined>;
}

/** The editor, as the session sees it. */
export interface EditorHost {
  /** May also implement UnsavedTexts (a write to a file the agent never read is refused when
   * it is open with different unsaved text). */
  tools: WorkspaceTools;
  /** Show the proposal and resolve once the person decided (may take minutes). */
  reviewEdit(p: EditProposed): Promise<EditDecision>;
  /** Ask the person whether to run the command. */
  approveCommand(r: CommandApprovalRequest): Promise<boolean>;
  /** When given, decided edits are followed up: accepted ones (persisted / reverted /
   * edited_after_accept; the session calls expectWrite on accept and noteWritten after the
   * agent's write_file), and ones the person rejected (written, via trackRejected). */
  outcomes?: OutcomeTracker;
}

export type SessionEvent =
  | { kind: "delta"; message: AssistantDelta }
  | { kind: "step"; message: AgentStep }
  | { kind: "summary"; message: SummaryMade }
  | { kind: "edit"; message: EditProposed }
  | { kind: "edit_decided"; message: EditProposed; decision: EditDecision; ack?: OutcomeAck; error?: Error }
  | { kind: "command"; message: CommandApprovalRequest; approved: boolean }
  /** A write_file was applied on top of the person's later changes (the accepted hunks where
   * they are now), or refused because it would have undone them. */
  | { kind: "write_rebased"; path: string }
  | { kind: "write_refused"; path: string; message: string }
  | { kind: "done"; message: TurnDone }
  | { kind: "error"; message: ErrorMessage };

export interface CreateOptions {
  mode?: SessionMode;
  title?: string;
  workspace?: string;
}
