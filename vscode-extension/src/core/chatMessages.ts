// The messages between the extension and the chat webview (media/chat.js), with no `vscode`
// import so they are unit-tested: what the webview posts is untrusted and parsed here, and the
// extension keeps every message it posts (deltas coalesced) so a re-created view is replayed.
import type { Hunk } from "../protocol/messages";
import type { DecisionKind } from "../protocol/vocab";

export type ToWebview =
  | { type: "user"; text: string }
  | { type: "delta"; text: string }
  | { type: "step"; tool: string; observation?: string }
  | { type: "summary"; summary: string; tokensBefore?: number | null; tokensAfter?: number | null }
  | { type: "done"; status: string; message?: string }
  | { type: "error"; message: string }
  | { type: "info"; text: string }
  | { type: "edit"; suggestionId: string; path: string; diff: string; hunks: Hunk[] }
  | { type: "editNotice"; suggestionId: string; text: string }
  | { type: "hunkDecided"; suggestionId: string; index: number; accepted: boolean }
  | {
      type: "editDecided";
      suggestionId: string;
      outcome: DecisionKind | "expired"; // expired: the turn ended before the person decided
      acceptedHunks?: number[];
      reason?: string;
    }
  | { type: "busy"; busy: boolean }
  | { type: "connection"; state: string; text: string }
  | { type: "reset" }
  | { type: "replay"; messages: ToWebview[] };

export type FromWebview =
  | { type: "ready" }
  | { type: "send"; text: string }
  | { type: "newSession" }
  | { type: "cancel" }
  | { type: "acceptEdit"; suggestionId: string }
  | { type: "rejectEdit"; suggestionId: string }
  | { type: "acceptHunk"; suggestionId: string; index: number }
  | { type: "rejectHunk"; suggestionId: string; index: number }
  | { type: "showDiff"; suggestionId: string };

/** Check what the webview posted (it is untrusted input to the extension). */
export function parseFromWebview(value: unknown): FromWebview | undefined {
  if (!value || typeof value !== "object") return undefined;
  const m = value as Record<string, unknown>;
  const id = typeof m.suggestionId === "string" ? m.suggestionId : undefined;
  const index = typeof m.index === "number" && Number.isInteger(m.index) && m.index >= 0 ? m.index : undefined;
  switch (m.type) {
    case "ready":
    case "newSession":
    case "cancel":
      return { type: m.type };
    case "send":
      return typeof m.text === "string" ? { type: "send", text: m.text } : undefined;
    case "acceptEdit":
    case "rejectEdit":
    case "showDiff":
      return id ? { type: m.type, suggestionId: id } : undefined;
    case "acceptHunk":
    case "rejectHunk":
      return id && index !== undefined ? { type: m.type, suggestionId: id, index } : undefined;
    default:
      return undefined;
  }
}

/** The VS Code command (and its arguments) a card button stands for: the same commands as the
 * CodeLens and the keys, so every way of deciding ends in one place. Undefined for the
 * messages the chat handles itself (send, newSession, cancel, ready). */
export function cardCommand(m: FromWebview): { command: string; args: unknown[] } | undefined {
  switch (m.type) {
    case "acceptEdit":
      return { command: "apprentice.acceptEdit", args: [m.suggestionId] };
    case "rejectEdit":
      return { command: "apprentice.rejectEdit", args: [m.suggestionId] };
    case "acceptHunk":
      return { command: "apprentice.acceptHunk", args: [m.suggestionId, m.index] };
    case "rejectHunk":
      return { command: "apprentice.rejectHunk", args: [m.suggestionId, m.index] };
    case "showDiff":
      return { command: "apprentice.showDiff", args: [m.suggestionId] };
    default:
      return undefined;
  }
}

/** Transcript of what the view shows, for replay; consecutive deltas are merged. */
export class Transcript {
  private items: ToWebview[] = [];

  add(m: ToWebview): void {
    if (m.type === "busy" || m.type === "connection" || m.type === "replay") return; // state, not history
    if (m.type === "reset") {
      this.items = [];
      return;
    }
    const last = this.items[this.items.length - 1];
    if (m.type === "delta" && last?.type === "delta") {
      this.items[this.items.length - 1] = { type: "delta", text: last.text + m.text };
      return;
    }
    this.items.push(m);
    if (this.items.length > 2000) this.items.splice(0, this.items.length - 2000);
  }

  get messages(): ToWebview[] {
    return [...this.items];
  }
}
