// `OutcomeTracker`: what became of an edit proposal. `settleMs` after the accepted text was
// written it reads the file again and reports "persisted" (unchanged), "reverted" (back to
// the text before the edit, or deleted) or "edited_after_accept" (anything else, with the
// final text). The session links an accept to the agent's next write_file of that path
// through expectWrite/noteWritten, since the server (not the editor) writes the result.
// A rejected proposal (trackRejected) is read again `settleMs` after the rejection: when the
// person changed the file meanwhile, "written" with the file's text (what they wrote instead
// of the proposal); unchanged or deleted, nothing. A write of the agent to that path in
// between ends it (the text would no longer be the person's alone).

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

export interface RejectedEdit {
  suggestionId: string;
  path: string;
  beforeText: string | undefined; // the file's text when it was rejected; undefined: none
}

export interface FollowUp {
  kind?: FollowUpKind; // absent when nothing was reported (unreadable, or nothing to say)
  finalText?: string;
  reported?: unknown; // what `report` resolved with (an OutcomeAck)
  error?: Error; // reading or reporting failed
}

const realTimers: Timers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

/** What a rejected edit's file says after settling: written, or nothing when unchanged. */
export function classifyRejected(edit: RejectedEdit, now: string | undefined): { kind: FollowUpKind; finalText: string } | undefined {
  if (now === undefined || now === edit.beforeText) return undefined;
  return { kind: "written", finalText: now };
}

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
  /** Rejected edits waiting to settle, by path key: a write of the agent there ends them. */
  private readonly rejected = new Map<string, Set<unknown>>();
  private disposed = false;

  constructor(private readonly opts: OutcomeTrackerOptions) {
    this.settleMs = opts.settleMs ?? 30_000;
    this.expectWriteMs = opts.expectWriteMs ?? 120_000;
    this.timers = opts.timers ?? realTimers;
  }

  /** Follow `edit` up after settleMs. Resolves with what was reported, or undefined when
   * dispose() came first. Never rejects: failures come back as `error`. */
  track(edit: TrackedEdit): Promise<FollowUp | undefined> {
    return this.after(() => undefined, () => this.settle(edit.path, edit.suggestionId, (now) => classifyFollowUp(edit, now)));
  }

  /** Follow a rejected edit up after settleMs: "written" when the person changed the file.
   * Resolves like track(), and with undefined when an agent write to the path came first. */
  trackRejected(edit: RejectedEdit): Promise<FollowUp | undefined> {
    const key = pathKey(edit.path);
    const followUp = this.after(
      (handle) => {
        const waiting = this.rejected.get(key) ?? new Set<unknown>();
        waiting.add(handle);
        this.rejected.set(key, waiting);
      },
      () => this.settle(edit.path, edit.suggestionId, (now) => classifyRejected(edit, now)),
      (handle) => {
        const waiting = this.rejected.get(key);
        waiting?.delete(handle);
        if (waiting?.size === 0) this.rejected.delete(key);
      },
    );
    this.lastFollowUp.set(edit.suggestionId, followUp);
    return followUp;
  }

  /** Run `settle` after settleMs; `started` sees the timer's handle, `ended` runs once it fired
   * or was cancelled. */
  private after(
    started: (handle: unknown) => void,
    settle: () => Promise<FollowUp>,
    ended: (handle: unknown) => void = () => undefined,
  ): Promise<FollowUp | undefined> {
    if (this.disposed) return Promise.resolve(undefined);
    return new Promise((resolve) => {
      const handle = this.timers.setTimeout(() => {
        this.pending.delete(handle);
        ended(handle);
        if (this.disposed) return resolve(undefined);
        void settle().then(resolve);
      }, this.settleMs);
      started(handle);
      this.pending.set(handle, () => {
        ended(handle);
        resolve(undefined);
      });
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
    this.cancelRejected(key);
    const waiting = this.expected.get(key);
    if (!waiting) return undefined;
    this.expected.delete(key);
    this.timers.clearTimeout(waiting.handle);
    // Read back the path as the proposal named it (the write may spell it differently).
    const followUp = this.track({ suggestionId: waiting.suggestionId, path: waiting.path, beforeText: waiting.beforeText, acceptedText: text });
    this.lastFollowUp.set(waiting.suggestionId, followUp);
    return followUp;
  }

  /** The agent wrote the path: a rejected edit's file is no longer the person's text alone. */
  private cancelRejected(key: string): void {
    for (const handle of [...(this.rejected.get(key) ?? [])]) {
      this.timers.clearTimeout(handle);
      const cancel = this.pending.get(handle);
      this.pending.delete(handle);
      cancel?.();
    }
    this.rejected.delete(key);
  }

  /** The tracking started for a suggestion by noteWritten or trackRejected (for callers and
   * tests to await). */
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
    this.rejected.clear();
  }

  private async settle(
    path: string,
    suggestionId: string,
    classify: (now: string | undefined) => { kind: FollowUpKind; finalText?: string } | undefined,
  ): Promise<FollowUp> {
    let now: string | undefined;
    try {
      now = await this.opts.readText(path);
    } catch (err) {
      return { error: new Error(`Could not read ${path} to follow the edit up: ${(err as Error).message}`) };
    }
    const found = classify(now);
    if (found === undefined) return {}; // nothing to report
    try {
      const reported = await this.opts.report(suggestionId, found.kind, found.finalText === undefined ? {} : { finalText: found.finalText });
      return { ...found, reported };
    } catch (err) {
      return { ...found, error: err as Error };
    }
  }
}
