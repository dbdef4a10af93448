// `WriteGuard`: the agent's write_file never clobbers what the person changed. It remembers
// the text each read_file served the agent (per path) and the hunks the person accepted for
// a path; `decideWrite` then says what a write_file may do:
//   - the file is as the agent read it -> write the agent's text;
//   - it changed, but the write is exactly an accepted proposal applied to what the agent
//     read -> write those hunks applied to the file as it is now (placed with offsets), so
//     the person's other changes stay; if a hunk's own lines changed -> refuse;
//   - it changed otherwise -> refuse with "file_changed", telling the agent to read it again;
//   - a file the agent never read: write, unless it is open with different unsaved text.

import { posix } from "node:path";
import type { Hunk } from "../protocol/messages";
import { applyHunks, HunkError } from "./hunks";
import { rebaseHunks } from "./hunkPlacement";
import { ToolError } from "./toolTypes";

/** What read_file last gave the agent: its text, or ABSENT when it said file_not_found. */
export const ABSENT = Symbol("absent");
export type Served = string | typeof ABSENT;

export interface AcceptedHunks {
  suggestionId: string;
  hunks: Hunk[];
  accepted: number[]; // Hunk.index values the person accepted
}

export interface WriteFacts {
  path: string; // as the agent named it (for messages)
  incoming: string; // the agent's new text
  current: string | undefined; // the file now (an open document's text first); undefined: no file
  served: Served | undefined; // undefined: the agent never read it
  unsaved: string | undefined; // the text of an open document with unsaved changes, if any
  accepted?: AcceptedHunks; // the person's accepted proposal for this path awaiting its write
}

export type WriteVerdict = { write: string; rebased: boolean } | { refuse: ToolError };

export function fileChanged(path: string, what: string): ToolError {
  return new ToolError(
    "file_changed",
    `'${path}' ${what} since you read it, so your write was not applied (it would undo the user's changes). ` +
      `Read the file again with read_file and redo your edit on its current text.`,
  );
}

/** The pure decision (see the file comment). */
export function decideWrite(f: WriteFacts): WriteVerdict {
  if (f.served === undefined) {
    if (f.unsaved !== undefined && f.unsaved !== f.incoming) {
      return { refuse: fileChanged(f.path, "is open in the editor with unsaved changes you have not read, and was not read") };
    }
    return { write: f.incoming, rebased: false };
  }
  if (f.served === ABSENT) {
    if (f.current === undefined || f.current === f.incoming) return { write: f.incoming, rebased: false };
    return { refuse: fileChanged(f.path, "did not exist when you looked, but the user created it") };
  }
  if (f.current === f.served || f.current === f.incoming) return { write: f.incoming, rebased: false };
  if (f.current === undefined) return { refuse: fileChanged(f.path, "was deleted") };
  if (f.accepted && isTheAcceptedEdit(f.served, f.incoming, f.accepted)) {
    try {
      return { write: rebaseHunks(f.current, f.accepted.hunks, f.accepted.accepted), rebased: true };
    } catch (err) {
      if (!(err instanceof HunkError)) throw err;
      return { refuse: fileChanged(f.path, `changed where your edit applies (${err.message.replace(/^The file changed under the proposal: /, "").replace(/\.$/, "")})`) };
    }
  }
  return { refuse: fileChanged(f.path, "was changed by the user") };
}

/** True when `incoming` is the accepted hunks applied to what the agent read: the server's
 * write of the person's decision, which may then be re-applied to the current text. */
function isTheAcceptedEdit(served: string, incoming: string, a: AcceptedHunks): boolean {
  try {
    return applyHunks(served, a.hunks, a.accepted) === incoming;
  } catch {
    return false; // the hunks were not made from what was served
  }
}

/** One key per file however the agent spells the relative path ("./a.py", "src/../a.py"). */
export function pathKey(path: string): string {
  return posix.normalize(path.replace(/\\/g, "/")).replace(/^(\.\/)+/, "").replace(/\/+$/, "");
}

const MAX_SERVED = 256; // paths remembered per session; the oldest read is forgotten first

/** The per-session memory behind decideWrite. */
export class WriteGuard {
  private readonly served = new Map<string, Served>();
  private readonly accepted = new Map<string, AcceptedHunks>();

  /** read_file answered `text` (or file_not_found: ABSENT). */
  noteServed(path: string, text: Served): void {
    const key = pathKey(path);
    this.served.delete(key); // re-insert: the map's order is the reads' order
    this.served.set(key, text);
    if (this.served.size > MAX_SERVED) this.served.delete(this.served.keys().next().value as string);
  }

  /** The person accepted (some of) a proposal for `path`; its write_file is expected next. */
  noteAccepted(path: string, accepted: AcceptedHunks): void {
    this.accepted.set(pathKey(path), accepted);
  }

  servedText(path: string): Served | undefined {
    return this.served.get(pathKey(path));
  }

  /** Decide a write_file; the accepted proposal of that path is used up by it. */
  decide(path: string, incoming: string, current: string | undefined, unsaved: string | undefined): WriteVerdict {
    const key = pathKey(path);
    const accepted = this.accepted.get(key);
    this.accepted.delete(key);
    return decideWrite({ path, incoming, current, served: this.served.get(key), unsaved, accepted });
  }

  /** The write happened. The agent believes the file holds the text it sent (`believed`),
   * even when a rebase wrote something else: a later write built on that belief without a
   * read then differs from the file, and is refused rather than undoing the person's lines. */
  noteWritten(path: string, believed: string): void {
    this.noteServed(path, believed);
  }
}
