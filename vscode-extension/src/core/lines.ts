// Python's `str.splitlines(keepends=True)` in TypeScript: the server's difflib hunks and its
// search line numbers are counted with it, so the client must split text the same way.

// \r\n first so it stays one terminator; then every other boundary Python knows.
const LINE_END = /\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]/g;

export function splitLinesKeepEnds(text: string): string[] {
  const out: string[] = [];
  let start = 0;
  LINE_END.lastIndex = 0;
  for (let m = LINE_END.exec(text); m; m = LINE_END.exec(text)) {
    const end = m.index + m[0].length;
    out.push(text.slice(start, end));
    start = end;
  }
  if (start < text.length) out.push(text.slice(start));
  return out;
}

/** The lines without their terminators (Python's `splitlines()`). */
export function splitLines(text: string): string[] {
  return splitLinesKeepEnds(text).map((l) => l.replace(/(\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029])$/, ""));
}
