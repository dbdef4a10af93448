// Where a proposal's hunks sit in the file as it is now, which may differ from the text the
// server diffed: `locateHunks` finds each hunk's old block (its context and removed lines)
// like `patch` with an offset and no fuzz — at its original line when it is still there,
// else at the nearest exact match after the hunk before it; a block found nowhere, or at two
// equally near places, is a conflict (that hunk's own lines changed). `rebaseHunks` applies
// the accepted hunks where they were found; `hunkPlaces` lays them out on both documents.

import type { Hunk } from "../protocol/messages";
import { HunkError, applyParsedAt, checkIndices, parseHunk, type ParsedHunk } from "./hunks";
import { splitLinesKeepEnds } from "./lines";

/** One hunk found in the current text. */
export interface LocatedHunk {
  hunk: ParsedHunk;
  at: number; // 0-based line of the current text where its old block starts
  offset: number; // at - hunk.oldStart: lines added (+) or removed (-) above it meanwhile
}

/** A hunk whose old block is not (unambiguously) in the current text. */
export interface HunkConflict {
  index: number;
  reason: string; // for the person and the log
}

export interface Location {
  located: LocatedHunk[]; // sorted by position; the conflicting hunks are not among them
  conflicts: HunkConflict[];
}

/** The lines a hunk expects in the file (context and removed), with their terminators. */
function oldBlock(h: ParsedHunk): string[] {
  return h.lines.filter((l) => l.op !== "+").map((l) => l.text);
}

function matchesAt(lines: string[], block: string[], at: number): boolean {
  if (at < 0 || at + block.length > lines.length) return false;
  for (let i = 0; i < block.length; i++) if (lines[at + i] !== block[i]) return false;
  return true;
}

/** Find every hunk of the proposal in `currentText`. */
export function locateHunks(currentText: string, hunks: Hunk[]): Location {
  const lines = splitLinesKeepEnds(currentText);
  const parsed = hunks.map(parseHunk).sort((a, b) => a.oldStart - b.oldStart);
  const located: LocatedHunk[] = [];
  const conflicts: HunkConflict[] = [];
  let offset = 0; // carried from the hunk before, as patch does
  let floor = 0; // the next hunk starts after the one before it ends
  for (const h of parsed) {
    const block = oldBlock(h);
    const first = h.oldStart + 1;
    const span = block.length > 1 ? `lines ${first}-${h.oldStart + block.length}` : `line ${first}`;
    if (block.length === 0) {
      // Only an insertion into an empty file has no old lines (the server diffs with 3 lines
      // of context); without lines to anchor it, it fits only a file that is still empty.
      if (lines.length === 0) located.push({ hunk: h, at: 0, offset: 0 });
      else conflicts.push({ index: h.index, reason: `hunk ${h.index + 1} was written for an empty file, which now has text` });
      continue;
    }
    const expected = Math.max(h.oldStart + offset, floor);
    const at = nearestMatch(lines, block, expected, floor);
    if (at === "ambiguous") {
      conflicts.push({ index: h.index, reason: `hunk ${h.index + 1}'s ${span} now appear at two places equally near` });
      continue;
    }
    if (at === undefined) {
      conflicts.push({ index: h.index, reason: `hunk ${h.index + 1}'s ${span} changed` });
      continue;
    }
    located.push({ hunk: h, at, offset: at - h.oldStart });
    offset = at - h.oldStart;
    floor = at + block.length;
  }
  return { located, conflicts };
}

/** The start of `block` nearest to `expected` (at or after `floor`); "ambiguous" when two
 * starts are equally near. */
function nearestMatch(lines: string[], block: string[], expected: number, floor: number): number | "ambiguous" | undefined {
  const last = lines.length - block.length;
  const reach = Math.max(expected - floor, last - expected);
  for (let d = 0; d <= reach; d++) {
    const up = expected - d >= floor && matchesAt(lines, block, expected - d);
    const down = d > 0 && matchesAt(lines, block, expected + d);
    if (up && down) return "ambiguous";
    if (up) return expected - d;
    if (down) return expected + d;
  }
  return undefined;
}

/** Describe conflicts in one sentence (for notices and errors). */
export function describeConflicts(conflicts: HunkConflict[]): string {
  return conflicts.map((c) => c.reason).join("; ");
}

/** `currentText` with the `accepted` hunks applied where they are now. Throws HunkError when
 * an accepted hunk's lines changed (a conflict) or an index does not exist. Hunks not
 * accepted may conflict: they change nothing. */
export function rebaseHunks(currentText: string, hunks: Hunk[], accepted: number[]): string {
  checkIndices(hunks, accepted);
  const { located, conflicts } = locateHunks(currentText, hunks);
  const chosen = new Set(accepted);
  const blocking = conflicts.filter((c) => chosen.has(c.index));
  if (blocking.length) throw new HunkError(`The file changed under the proposal: ${describeConflicts(blocking)}.`);
  const wanted = located.filter((l) => chosen.has(l.hunk.index));
  return applyParsedAt(splitLinesKeepEnds(currentText), wanted, accepted);
}

/** Where one hunk sits in the real file (old) and in the proposal (new), 0-based lines. */
export interface HunkPlace {
  index: number;
  oldStart: number;
  oldCount: number;
  newStart: number;
  newCount: number;
  removedLines: number[]; // in the real file
  addedLines: number[]; // in the proposal
}

/** Lay located hunks out on the real file and on the proposal (every hunk applied). */
export function hunkPlaces(located: LocatedHunk[]): HunkPlace[] {
  const places: HunkPlace[] = [];
  let shift = 0; // new line index - old line index before the current hunk
  for (const { hunk: h, at } of [...located].sort((a, b) => a.at - b.at)) {
    let oldLine = at;
    let newLine = at + shift;
    const place: HunkPlace = { index: h.index, oldStart: at, oldCount: 0, newStart: newLine, newCount: 0, removedLines: [], addedLines: [] };
    for (const { op } of h.lines) {
      if (op === " ") {
        oldLine++;
        newLine++;
        place.oldCount++;
        place.newCount++;
      } else if (op === "-") {
        place.removedLines.push(oldLine++);
        place.oldCount++;
      } else {
        place.addedLines.push(newLine++);
        place.newCount++;
      }
    }
    shift += place.newCount - place.oldCount;
    places.push(place);
  }
  return places;
}

/** The hunk (index) whose lines hold `line` on one side, for commands at the cursor. */
export function hunkAtLine(places: HunkPlace[], line: number, onProposal: boolean): number | undefined {
  for (const p of places) {
    const start = onProposal ? p.newStart : p.oldStart;
    const count = onProposal ? p.newCount : p.oldCount;
    if (line >= start && line < start + Math.max(count, 1)) return p.index;
  }
  return undefined;
}
