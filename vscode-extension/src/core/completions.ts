// `CompletionTracker`: what the person did with an inline completion (ghost text), decided
// from the document changes that follow it. Pure logic: the VS Code layer feeds it `shown`
// and the document's content changes, and sends what it reports as edit.outcome.
//   - the whole text inserted at the offset                     -> "accepted"
//   - a proper prefix ending at a word or line boundary          -> "partially_accepted"
//     (accept-next-word/line; more may follow, so it is reported when something unrelated
//     happens, with acceptedLength = the characters taken so far)
//   - anything else, dismiss(), or a newer shown                 -> "rejected" (reason "dismissed")

import type { CompletionOutcome } from "../protocol/vocab";

export interface CompletionReport {
  acceptedLength?: number;
  reason?: string;
}

export interface ShownCompletion {
  suggestionId: string;
  documentUri: string;
  offset: number; // where the ghost text starts in the document
  text: string;
}

export interface DocumentChange {
  offset: number;
  removedLength: number;
  insertedText: string;
}

export type CompletionReporter = (suggestionId: string, outcome: CompletionOutcome, extra: CompletionReport) => void;

const WORD = /[\p{L}\p{N}_]/u;

/** True when `text[0:k]` ends where accept-next-word or accept-next-line could stop. */
export function isBoundary(text: string, k: number): boolean {
  if (k <= 0 || k >= text.length) return k === text.length;
  const before = text[k - 1];
  const after = text[k];
  if (before === "\n" || after === "\n" || after === "\r") return true;
  if (/\s/.test(after) || /\s/.test(before)) return true;
  return WORD.test(before) !== WORD.test(after);
}

export class CompletionTracker {
  private current?: ShownCompletion & { taken: number };

  constructor(private readonly report: CompletionReporter) {}

  /** The suggestion currently on screen (or partly taken), if any. */
  get active(): (ShownCompletion & { taken: number }) | undefined {
    return this.current;
  }

  shown(s: ShownCompletion): void {
    if (this.current && this.current.suggestionId === s.suggestionId) return; // shown again
    this.settle();
    this.current = { ...s, taken: 0 };
    this.report(s.suggestionId, "shown", {});
  }

  onDocumentChange(uri: string, changes: DocumentChange[]): void {
    const c = this.current;
    if (!c || uri !== c.documentUri || changes.length === 0) return;
    const change = changes.length === 1 ? changes[0] : undefined;
    const rest = c.text.slice(c.taken);
    if (
      change &&
      change.removedLength === 0 &&
      change.offset === c.offset + c.taken &&
      change.insertedText.length > 0 &&
      rest.startsWith(change.insertedText)
    ) {
      const taken = c.taken + change.insertedText.length;
      if (taken === c.text.length) {
        this.current = undefined;
        this.report(c.suggestionId, "accepted", { acceptedLength: taken });
        return;
      }
      if (isBoundary(c.text, taken)) {
        c.taken = taken; // keep waiting: the next word may follow
        return;
      }
    }
    this.settle();
  }

  /** The ghost text went away without being taken (Escape, cursor moved, ...). */
  dismiss(): void {
    this.settle();
  }

  private settle(): void {
    const c = this.current;
    if (!c) return;
    this.current = undefined;
    if (c.taken > 0) this.report(c.suggestionId, "partially_accepted", { acceptedLength: c.taken });
    else this.report(c.suggestionId, "rejected", { reason: "dismissed" });
  }
}
