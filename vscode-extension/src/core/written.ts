// `WrittenTracker`: what the person wrote at the place of an inline completion they did not
// take, for the "written" follow-up (docs/protocol.md, EditOutcome). Pure logic: the VS Code
// layer feeds it the same document changes as CompletionTracker, and sends what it reports.
//
// The place is what stands between the text before the completion's position and the text
// after it. It starts empty at the position when the completion is shown and is followed
// through every change of the document:
//   - an insertion before it shifts it; a change after it is ignored;
//   - an insertion at it, or a change inside it, is written text (so a taken prefix of a
//     partially accepted completion is part of it);
//   - a change wholly before it (not reaching its start) moves it;
//   - a change that removes text up to its start (or across it) makes it unknowable: the
//     person rewrote what the completion continued, so nothing is reported.
// `settleMs` after the completion was not taken (rejected, or partially accepted) the text
// of the place is reported -- "" when nothing was written there, which says staying quiet
// was right. Nothing is reported for a document that was closed, after dispose(), or for a
// completion that was accepted. Each place is followed on its own: a newer completion does
// not end an older one's follow-up; at most `maxFollowed` are followed, the oldest dropped.

import type { DocumentChange } from "./completions";
import type { Timers } from "./outcomes";

export interface WrittenTrackerOptions {
  /** Send the follow-up: `finalText` is the text now at the completion's place. */
  report(suggestionId: string, finalText: string): void;
  /** How long after "not taken" the place is read; a function is asked each time (a setting
   * the person may change). Default 30000. */
  settleMs?: number | (() => number);
  timers?: Timers;
  maxFollowed?: number; // default 20
}

interface Place {
  documentUri: string;
  start: number; // offset of the place in the document as it is now
  text: string; // what stands there now
  handle?: unknown; // the settle timer, once the completion was not taken
}

/** A place holding more than this is not someone writing code there (a paste of a file, a
 * rewrite): it is not followed further. Well under the protocol's limit on final_text. */
export const MAX_WRITTEN_CHARS = 64 * 1024;
const REMEMBERED_IDS = 500;

const realTimers: Timers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

export class WrittenTracker {
  private readonly settleMs: () => number;
  private readonly timers: Timers;
  private readonly maxFollowed: number;
  private readonly places = new Map<string, Place>(); // by suggestion id, oldest first
  private readonly seen = new Set<string>(); // ids ever followed: one follow-up each at most
  private disposed = false;

  constructor(private readonly opts: WrittenTrackerOptions) {
    const settle = opts.settleMs ?? 30_000;
    this.settleMs = typeof settle === "function" ? settle : () => settle;
    this.timers = opts.timers ?? realTimers;
    this.maxFollowed = Math.max(1, opts.maxFollowed ?? 20);
  }

  /** A completion was shown at `offset`: start following its place. */
  follow(s: { suggestionId: string; documentUri: string; offset: number }): void {
    if (this.disposed || this.seen.has(s.suggestionId)) return; // shown again: already followed
    this.seen.add(s.suggestionId);
    if (this.seen.size > REMEMBERED_IDS) this.seen.delete(this.seen.values().next().value as string);
    this.places.set(s.suggestionId, { documentUri: s.documentUri, start: s.offset, text: "" });
    while (this.places.size > this.maxFollowed) this.drop(this.places.keys().next().value as string);
  }

  /** The completion was rejected or only partly taken: report its place after settleMs. */
  notTaken(suggestionId: string): void {
    const place = this.places.get(suggestionId);
    if (!place || place.handle !== undefined) return;
    place.handle = this.timers.setTimeout(() => {
      place.handle = undefined; // fired: nothing to clear any more
      if (this.places.get(suggestionId) !== place) return;
      this.places.delete(suggestionId);
      this.opts.report(suggestionId, place.text);
    }, this.settleMs());
  }

  /** The completion was accepted whole: nothing was written instead. */
  forget(suggestionId: string): void {
    this.drop(suggestionId);
  }

  /** The changes of one document event, in order (each offset in the text after the ones
   * before it, as VS Code reports them). */
  onDocumentChange(uri: string, changes: DocumentChange[]): void {
    for (const [id, place] of this.places) {
      if (place.documentUri !== uri) continue;
      if (!changes.every((c) => applyChange(place, c))) this.drop(id);
    }
  }

  /** The document was closed: its places can no longer be followed. */
  documentClosed(uri: string): void {
    for (const [id, place] of this.places) if (place.documentUri === uri) this.drop(id);
  }

  /** The ids followed now (for tests and the log). */
  get followed(): string[] {
    return [...this.places.keys()];
  }

  /** Stop: nothing more is reported (what became of the followed places is not known). */
  dispose(): void {
    this.disposed = true;
    for (const id of [...this.places.keys()]) this.drop(id);
  }

  private drop(suggestionId: string): void {
    const place = this.places.get(suggestionId);
    if (!place) return;
    if (place.handle !== undefined) this.timers.clearTimeout(place.handle);
    this.places.delete(suggestionId);
  }
}

/** Move `place` through one change; false when the place can no longer be known. */
export function applyChange(place: { start: number; text: string }, change: DocumentChange): boolean {
  const { offset, removedLength, insertedText } = change;
  const end = place.start + place.text.length;
  if (offset < place.start) {
    // Text right before the place is what the completion continued: removed or replaced
    // there, the prompt the model saw no longer leads to what is written (not reported).
    // A change wholly before that (a line above edited) only moves the place.
    if (removedLength > 0 && offset + removedLength >= place.start) return false;
    place.start += insertedText.length - removedLength;
    return true;
  }
  if (offset > end) return true; // after it
  // At or inside the place: written there. A removal that runs past its end also takes text
  // after the place; what stands between before and after is still this span.
  const from = offset - place.start;
  const to = Math.min(offset + removedLength, end) - place.start;
  place.text = place.text.slice(0, from) + insertedText + place.text.slice(to);
  return place.text.length <= MAX_WRITTEN_CHARS;
}
