// What the person decided about one edit proposal: made by the review (hunks.ts, the editor's
// review UI), acted on by the session (session.ts), which sends it as an edit.outcome. Its own
// module so that the hunk logic need not import the session.

import type { DecisionKind } from "../protocol/vocab";

/** What the person decided about one edit proposal. */
export type EditDecision = {
  outcome: DecisionKind;
  acceptedHunks?: number[]; // Hunk.index values, for partially_accepted
  reason?: string; // why it was rejected (reaches the model)
};
