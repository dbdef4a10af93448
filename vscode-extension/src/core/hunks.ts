// Hunks of an edit proposal: `applyHunks` rebuilds the text with only the accepted hunks
// (the client-side twin of agent_server/agent/edits_diff.apply_hunks, checked against it by
// fixtures), and `ProposalReview` collects the person's per-hunk decisions into an
// EditDecision. Lines keep their own terminators, so CRLF and a missing final newline survive.

import type { Hunk } from "../protocol/messages";
import type { EditDecision } from "./decision";
import { splitLinesKeepEnds } from "./lines";

const NO_EOL = "\\ No newline at end of file";
const HEADER = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/;

export interface ParsedHunk {
  index: number;
  oldStart: number; // 0-based index of the first old line the hunk covers
  oldCount: number;
  lines: Array<{ op: " " | "-" | "+"; text: string }>; // text keeps its line terminator
}

/** Thrown when a hunk is malformed or does not match the text it is applied to. */
export class HunkError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "HunkError";
  }
}

export function parseHunk(hunk: Hunk): ParsedHunk {
  const raw = hunk.diff.split(/(?<=\n)/); // diff lines always end with "\n" (see edits_diff._line)
  const head = HEADER.exec(raw[0] ?? "");
  if (!head) throw new HunkError(`Hunk ${hunk.index} does not start with an @@ header: ${JSON.stringify(raw[0] ?? "")}`);
  const start = Number(head[1]);
  const oldCount = head[2] === undefined ? 1 : Number(head[2]);
  // difflib: an empty range names the line before it, so its 0-based start is `start`.
  const oldStart = oldCount === 0 ? start : start - 1;
  const lines: ParsedHunk["lines"] = [];
  for (const line of raw.slice(1)) {
    if (line.startsWith(NO_EOL)) {
      const last = lines[lines.length - 1];
      if (!last) throw new HunkError(`Hunk ${hunk.index}: '${NO_EOL}' before any line.`);
      last.text = last.text.slice(0, -1); // the "\n" the diff added
      continue;
    }
    const op = line[0];
    if (op !== " " && op !== "-" && op !== "+") {
      throw new HunkError(`Hunk ${hunk.index}: unexpected diff line ${JSON.stringify(line.slice(0, 60))}.`);
    }
    lines.push({ op, text: line.slice(1) });
  }
  return { index: hunk.index, oldStart, oldCount, lines };
}

/** `oldText` with only the `accepted` hunks applied (indices are Hunk.index). Accepting all
 * gives the proposed text, none gives `oldText`. Throws HunkError when the hunks do not fit
 * `oldText` (the file changed since the proposal) or an index does not exist. */
export function applyHunks(oldText: string, hunks: Hunk[], accepted: number[]): string {
  checkIndices(hunks, accepted);
  const parsed = hunks.map(parseHunk);
  return applyParsedAt(splitLinesKeepEnds(oldText), parsed.map((h) => ({ hunk: h, at: h.oldStart })), accepted);
}

/** Throws HunkError when `accepted` names a hunk the proposal does not have. */
export function checkIndices(hunks: Hunk[], accepted: number[]): void {
  const known = new Set(hunks.map((h) => h.index));
  const bad = [...new Set(accepted)].filter((i) => !known.has(i)).sort((a, b) => a - b);
  if (bad.length) {
    throw new HunkError(`Hunk indices [${bad.join(", ")}] do not exist; this proposal has ${hunks.length} hunks.`);
  }
}

/** The old lines with each hunk applied where `at` (0-based line) says its old block starts;
 * only the `accepted` hunks change anything. Every old line a hunk names must be there. */
export function applyParsedAt(old: string[], placed: Array<{ hunk: ParsedHunk; at: number }>, accepted: number[]): string {
  const chosen = new Set(accepted);
  const out: string[] = [];
  let pos = 0; // next old line not yet copied
  for (const { hunk: h, at } of [...placed].sort((a, b) => a.at - b.at)) {
    if (at < pos) throw new HunkError(`Hunk ${h.index} overlaps the hunk before it.`);
    out.push(...old.slice(pos, at));
    pos = at;
    const take = chosen.has(h.index);
    for (const { op, text } of h.lines) {
      if (op === "+") {
        if (take) out.push(text);
        continue;
      }
      if (old[pos] !== text) {
        throw new HunkError(
          `Hunk ${h.index} does not apply at line ${pos + 1}: expected ${JSON.stringify(text)}, ` +
            `found ${JSON.stringify(old[pos] ?? "<end of file>")}. The file changed since the proposal.`,
        );
      }
      if (op === " " || !take) out.push(old[pos]);
      pos += 1;
    }
  }
  out.push(...old.slice(pos));
  return out.join("");
}

/** One pending proposal's per-hunk decisions. */
export class ProposalReview {
  private readonly decisions = new Map<number, boolean>();
  private readonly listeners = new Set<(d: EditDecision) => void>();
  private reason?: string;
  private whole?: boolean; // acceptAll/rejectAll on a proposal without hunks
  private announced = false;

  constructor(readonly hunks: Hunk[]) {}

  get hunkIndices(): number[] {
    return this.hunks.map((h) => h.index);
  }

  /** Undefined while the hunk is undecided. */
  decided(index: number): boolean | undefined {
    return this.decisions.get(index);
  }

  decideHunk(index: number, accept: boolean): void {
    if (!this.hunks.some((h) => h.index === index)) {
      throw new HunkError(`Hunk ${index} does not exist; this proposal has hunks ${JSON.stringify(this.hunkIndices)}.`);
    }
    this.decisions.set(index, accept);
    this.announce();
  }

  acceptAll(): void {
    this.whole = true;
    for (const h of this.hunks) this.decisions.set(h.index, true);
    this.announce();
  }

  rejectAll(reason?: string): void {
    this.whole = false;
    if (reason !== undefined) this.reason = reason;
    for (const h of this.hunks) this.decisions.set(h.index, false);
    this.announce();
  }

  /** Why (some of) it was rejected; sent with the outcome. */
  setReason(reason: string | undefined): void {
    this.reason = reason;
  }

  /** The decision once every hunk is decided; undefined before. */
  decision(): EditDecision | undefined {
    if (this.hunks.length === 0) {
      if (this.whole === undefined) return undefined;
      return this.whole ? { outcome: "accepted" } : this.withReason({ outcome: "rejected" });
    }
    if (this.hunks.some((h) => !this.decisions.has(h.index))) return undefined;
    const acceptedHunks = this.hunkIndices.filter((i) => this.decisions.get(i));
    if (acceptedHunks.length === this.hunks.length) return { outcome: "accepted" };
    if (acceptedHunks.length === 0) return this.withReason({ outcome: "rejected" });
    return this.withReason({ outcome: "partially_accepted", acceptedHunks });
  }

  /** Called once, when the last hunk is decided. */
  onDecided(fn: (d: EditDecision) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private withReason(d: EditDecision): EditDecision {
    return this.reason === undefined ? d : { ...d, reason: this.reason };
  }

  private announce(): void {
    const d = this.decision();
    if (!d || this.announced) return;
    this.announced = true;
    for (const fn of [...this.listeners]) fn(d);
  }
}
