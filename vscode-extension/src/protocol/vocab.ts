// The outcome vocabulary of the extension. The kinds themselves come from the protocol's
// generated types (EditOutcome.outcome in docs/protocol.schema.json, which the server takes
// from feedback/vocab.py); here are only the subsets each part of the extension reports, each
// checked against them by the compiler, so a renamed or dropped kind fails `npm run typecheck`.

import type { OutcomeKind } from "./messages";

/** A set of outcome kinds; every member must be one of the protocol's. */
type Kinds<K extends OutcomeKind> = K;

/** The person's verdict on an edit proposal: what the agent waits for (DecisionKind). */
export type DecisionKind = Kinds<"accepted" | "rejected" | "partially_accepted">;

/** A follow-up of a suggestion that was not taken: what the person wrote at its place instead
 * (core/written.ts for completions, core/outcomes.ts for rejected edits). */
export type WrittenKind = Kinds<"written">;

/** What an edit became after the settle time (core/outcomes.ts): an accepted one kept,
 * undone or changed; a rejected one written differently by the person. */
export type FollowUpKind = Kinds<"persisted" | "reverted" | "edited_after_accept"> | WrittenKind;

/** What an inline completion becomes (core/completionFeedback.ts). */
export type CompletionOutcome = Kinds<"shown" | "accepted" | "partially_accepted" | "rejected"> | WrittenKind;

/** Prefix of a rejection the editor made because it could not show the proposal: no person
 * decided it, so the learner must not train on it (feedback/vocab.py EDITOR_REASON_PREFIX; the
 * schema documents it on EditOutcome.reason, and a unit test checks the two agree). */
export const EDITOR_REASON_PREFIX = "[editor] ";
