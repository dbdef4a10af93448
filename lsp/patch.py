"""Apply a unified diff to the text it was made from (the agent server's `edit.proposed`).

    after = apply_unified(before, proposal.diff)   # PatchError when it does not fit

The agent server sends proposals as unified diffs (agent_server/agent/edits/diff.py); the
language server needs the whole new text to build a WorkspaceEdit. Lines keep their own
terminators; "\\ No newline at end of file" drops the terminator of the line before it.
Every context and removed line is checked against `before`. Tests: tests/lsp/test_text.py.
"""

from __future__ import annotations

import re

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchError(ValueError):
    """The diff does not apply to the text it is said to come from."""


def apply_unified(before: str, diff: str) -> str:
    old = before.splitlines(keepends=True)
    out: list[str] = []
    pos = 0  # next line of `old` not yet copied
    lines = diff.splitlines(keepends=True)
    i = 0
    while i < len(lines) and not lines[i].startswith("@@"):
        i += 1  # the ---/+++ header
    last: str | None = None  # which list the previous body line went to: "old" | "new"
    while i < len(lines):
        line = lines[i]
        i += 1
        match = _HUNK.match(line)
        if match:
            start = int(match.group(1))
            count = int(match.group(2)) if match.group(2) is not None else 1
            first = start - 1 if count else start  # an empty old range names the line before
            if first < pos or first > len(old):
                raise PatchError(f"hunk {line.strip()} does not fit a {len(old)}-line text")
            out += old[pos:first]
            pos = first
            continue
        tag, body = line[:1], line[1:]
        if tag == "\\":  # "\ No newline at end of file": the diff added the previous "\n"
            if last == "new" and out and out[-1].endswith("\n"):
                out[-1] = out[-1][:-1]  # (a line ending in a lone "\r" keeps its "\r")
            continue
        if tag in (" ", "-"):
            if pos >= len(old) or old[pos].rstrip("\r\n") != body.rstrip("\r\n"):
                raise PatchError(f"line {pos + 1} of the text is not {body.rstrip()!r}")
            if tag == " ":
                out.append(old[pos])
                last = "new"
            else:
                last = "old"
            pos += 1
        elif tag == "+":
            out.append(body)
            last = "new"
        else:
            raise PatchError(f"not a unified diff line: {line[:80]!r}")
    return "".join(out + old[pos:])
