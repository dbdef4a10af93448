// `OutcomeTracker`: what became of an accepted edit. `settleMs` after the accepted text was
// written it reads the file again and reports "persisted" (unchanged), "reverted" (back to
// the text before the edit, or deleted) or "edited_after_accept" (anything else, with the
// final text). The session links an accept to the agent's next write_file of that path
// through expectWrite/noteWritten, since the server (not the editor) writes the result.

import { pathKey } from "./writeGuard";
import type { FollowUpKind } from "../protocol/vocab";

export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export interface OutcomeTrackerOptions {
  /** The file's text now; undefined when it no longer exists. */
  readText(path: string): Promise<string | undefined>;
  /** Send the follow-up (e.g. AgentSession.reportOutcome); its promise is awaited. */
  report(suggestionId: string, kind: FollowUpKind, extra: { finalText?: string }): Promise<unknown> | void;
  settleMs?: number; // default 30000
  /** How long an accept waits for its write_file before it is forgotten; default 120000. */
  expectWriteMs?: number;
  timers?: Timers;
}

export interface TrackedEdit {
  suggestionId: string;
  path: string;
  beforeText: string | undefined; // undefined: the file did not exist
  acceptedText: string;
}

export interface FollowUp {
  kind?: FollowUpKind; // absent when the file could not be read (nothing was reported)
  finalText?: string;
  reported?: unknown; // what `report` resolved with (an OutcomeAck)
  error?: Error; // reading or reporting failed
}

const realTimers: Timers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

/** Classify the text found after settling. */
export function classifyFollowUp(edit: TrackedEdit, now: string | undefined): { kind: FollowUpKind; finalText?: string } {
  if (now === edit.acceptedText) return { kind: "persisted" };
  if (now === undefined || now === edit.beforeText) return { kind: "reverted" };
  return { kind: "edited_after_accept", finalText: now };
}

export class OutcomeTracker {
  readonly settleMs: number;
  private readonly expectWriteMs: number;
  private readonly timers: Timers;
  /** Each settle timer still running, with what resolves its track() promise on dispose. */
  private readonly pending = new Map<unknown, () => void>();
  private readonly lastFollowUp = new Map<string, Promise<FollowUp | undefined>>();
  private readonly expected = new Map<string, { suggestionId: string; path: string; beforeText: string | undefined; handle: unknown }>();
  private disposed = false;

  constructor(private readonly opts: OutcomeTrackerOptions) {
    this.settleMs = opts.settleMs ?? 30_000;
    this.expectWriteMs = opts.expectWriteMs ?? 120_000;
    this.timers = opts.timers ?? realTimers;
  }

  /** Follow `edit` up after settleMs. Resolves with what was reported, or undefined when
   * dispose() came first. Never rejects: failures come back as `error`. */
  track(edit: TrackedEdit): Promise<FollowUp | undefined> {
    if (this.disposed) return Promise.resolve(undefined);
    return new Promise((resolve) => {
      const handle = this.timers.setTimeout(() => {
        this.pending.delete(handle);
        if (this.disposed) return resolve(undefined);
        void this.settle(edit).then(resolve);
      }, this.settleMs);
      this.pending.set(handle, () => resolve(undefined));
    });
  }

  /** An accept was sent for `path`: the next write of that path is the accepted text. */
  expectWrite(e: { suggestionId: string; path: string; beforeText: string | undefined }): void {
    if (this.disposed) return;
    const key = pathKey(e.path);
    const old = this.expected.get(key);
    if (old) this.timers.clearTimeout(old.handle);
    const handle = this.timers.setTimeout(() => this.expected.delete(key), this.expectWriteMs);
    this.expected.set(key, { suggestionId: e.suggestionId, path: e.path, beforeText: e.beforeText, handle });
  }

  /** The agent wrote `text` to `path`. Starts tracking when an accept was waiting for it;
   * returns that tracking's promise, or undefined when nothing waited. */
  noteWritten(path: string, text: string): Promise<FollowUp | undefined> | undefined {
    const key = pathKey(path);
    const waiting = this.expected.get(key);
    if (!waiting) return undefined;
    this.expected.delete(key);
    this.timers.clearTimeout(waiting.handle);
    // Read back the path as the proposal named it (the write may spell it differently).
    const followUp = this.track({ suggestionId: waiting.suggestionId, path: waiting.path, beforeText: waiting.beforeText, acceptedText: text });
    this.lastFollowUp.set(waiting.suggestionId, followUp);
    return followUp;
  }

  /** The tracking started for a suggestion by noteWritten (for callers and tests to await). */
  followUpOf(suggestionId: string): Promise<FollowUp | undefined> | undefined {
    return this.lastFollowUp.get(suggestionId);
  }

  get pendingCount(): number {
    return this.pending.size;
  }

  /** Cancel every timer; pending track() promises resolve with undefined. */
  dispose(): void {
    this.disposed = true;
    for (const [handle, cancel] of this.pending) {
      this.timers.clearTimeout(handle);
      cancel();
    }
    for (const e of this.expected.values()) this.timers.clearTimeout(e.handle);
    this.pending.clear();
    this.expected.clear();
  }

  private async settle(edit: TrackedEdit): Promise<FollowUp> {
    let now: string | undefined;
    try {
      now = await this.opts.readText(edit.path);
    } catch (err) {
      return { error: new Error(`Could not read ${edit.path} to follow the edit up: ${(err as Error).message}`) };
    }
    const found = classifyFollowUp(edit, now);
    try {
      const reported = await this.opts.report(edit.suggestionId, found.kind, found.finalText === undefined ? {} : { finalText: found.finalText });
      return { ...found, reported };
    } catch (err) {
      return { ...found, error: err as Error };
    }
  }
}
