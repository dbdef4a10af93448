// `CompletionFeedback`: everything the editor reports about its inline completions, decided in
// one editor-free place. The VS Code layer (src/vscode/completions.ts) hands it each server
// reply, the document changes, dismissals and the accept command, and sends what it reports
// as edit.outcome:
//   - a reply with empty text shows nothing and reports nothing (the model chose to stay
//     quiet; no ghost text was seen, so there is no `shown`);
//   - CompletionTracker decides shown / accepted / partially_accepted / rejected;
//   - WrittenTracker follows the place of each completion not taken and reports `written`
//     with what the person wrote there, the settle time after it was not taken.
// Nothing is reported about a completion after it was accepted.

import { CompletionTracker, type CompletionReport, type DocumentChange } from "./completions";
import type { Timers } from "./outcomes";
import { WrittenTracker } from "./written";
import type { CompletionOutcome } from "../protocol/vocab";

export interface FeedbackExtra extends CompletionReport {
  finalText?: string; // for "written"
}

export type FeedbackSender = (suggestionId: string, outcome: CompletionOutcome, extra: FeedbackExtra) => void;

export interface CompletionFeedbackOptions {
  /** The settle time of `written` follow-ups, asked each time one starts. Default 30000. */
  settleMs?: number | (() => number);
  timers?: Timers;
  maxFollowed?: number; // places followed at once (default 20)
}

const REMEMBERED_ACCEPTED = 500;

export class CompletionFeedback {
  readonly tracker: CompletionTracker;
  readonly written: WrittenTracker;
  private readonly accepted = new Set<string>(); // ids already reported accepted: nothing after

  constructor(private readonly send: FeedbackSender, opts: CompletionFeedbackOptions = {}) {
    this.tracker = new CompletionTracker((id, outcome, extra) => this.route(id, outcome, extra));
    this.written = new WrittenTracker({
      report: (id, finalText) => this.route(id, "written", { finalText }),
      settleMs: opts.settleMs,
      timers: opts.timers,
      maxFollowed: opts.maxFollowed,
    });
  }

  /** The server's suggestion for the cursor at `offset`: the text to show, or undefined to
   * show nothing. A shown one is reported `shown` and its place followed. */
  offer(reply: { suggestion_id: string; text: string }, documentUri: string, offset: number): string | undefined {
    if (!reply.text) return undefined;
    this.tracker.shown({ suggestionId: reply.suggestion_id, documentUri, offset, text: reply.text });
    this.written.follow({ suggestionId: reply.suggestion_id, documentUri, offset });
    return reply.text;
  }

  onDocumentChange(uri: string, changes: DocumentChange[]): void {
    if (changes.length === 0) return;
    this.tracker.onDocumentChange(uri, changes);
    this.written.onDocumentChange(uri, changes);
  }

  /** The ghost text went away without being taken (cursor moved, another editor, ...). */
  dismiss(): void {
    this.tracker.dismiss();
  }

  /** The item's command: the editor inserted the whole completion (Tab). */
  acceptedByCommand(suggestionId: string, length: number | undefined): void {
    this.route(suggestionId, "accepted", { acceptedLength: length });
  }

  documentClosed(uri: string): void {
    this.written.documentClosed(uri);
  }

  /** Follow-ups still waiting are dropped: what became of those places is not known. */
  dispose(): void {
    this.written.dispose();
  }

  private route(id: string, outcome: CompletionOutcome, extra: FeedbackExtra): void {
    if (this.accepted.has(id)) return; // accepted already; a later settle is not news
    if (outcome === "accepted") {
      this.accepted.add(id);
      if (this.accepted.size > REMEMBERED_ACCEPTED) this.accepted.delete(this.accepted.values().next().value as string);
      this.written.forget(id);
    } else if (outcome === "rejected" || outcome === "partially_accepted") {
      this.written.notTaken(id);
    }
    this.send(id, outcome, extra);
  }
}
