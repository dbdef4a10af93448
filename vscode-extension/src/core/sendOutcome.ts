// Sending an edit outcome: one edit.outcome, retried on a timeout with the same
// client_event_id (so the server stores it once), until its outcome.ack arrives. Used by the
// session for edit decisions and by the editor for follow-ups and inline completions.

import type { AgentConnection } from "./connection";
import { RequestTimeout } from "./errors";
import { newEventId, type OutcomeAck, type OutcomeKind, type ServerMessage } from "../protocol/messages";

export interface OutcomeExtra {
  reason?: string;
  acceptedLength?: number;
  finalText?: string;
  acceptedHunks?: number[];
  clientEventId?: string; // reuse one to resend the same outcome (stored once)
}

const OUTCOME_ATTEMPTS = 3;
const OUTCOME_TIMEOUT_MS = 15_000;

/** Send one edit.outcome and await its outcome.ack. Retries on a timeout with the same
 * client_event_id, so the server stores it once however often it arrives. */
export async function sendOutcome(
  conn: AgentConnection,
  suggestionId: string,
  outcome: OutcomeKind,
  extra: OutcomeExtra = {},
): Promise<OutcomeAck> {
  const clientEventId = extra.clientEventId ?? newEventId();
  const message = {
    type: "edit.outcome" as const,
    suggestion_id: suggestionId,
    outcome,
    client_event_id: clientEventId,
    client_time: new Date().toISOString(),
    ...(extra.reason !== undefined ? { reason: extra.reason } : {}),
    ...(extra.acceptedHunks !== undefined ? { accepted_hunks: extra.acceptedHunks } : {}),
    ...(extra.acceptedLength !== undefined ? { accepted_length: extra.acceptedLength } : {}),
    ...(extra.finalText !== undefined ? { final_text: extra.finalText } : {}),
  };
  const isAck = (m: ServerMessage): m is OutcomeAck =>
    m.type === "outcome.ack" && m.client_event_id === clientEventId;
  for (let attempt = 1; ; attempt++) {
    try {
      return await conn.request(message, isAck, OUTCOME_TIMEOUT_MS);
    } catch (err) {
      if (!(err instanceof RequestTimeout) || attempt >= OUTCOME_ATTEMPTS) throw err;
    }
  }
}
