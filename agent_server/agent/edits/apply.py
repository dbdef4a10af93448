"""Edit application: SEARCH/REPLACE blocks and whole-file replacement, all-or-nothing.

    from agent_server.agent.edits import SearchReplace, apply_edits, parse_search_replace
    new_text = apply_edits(old_text, [SearchReplace("x = 1\\n", "x = 2\\n")])
    blocks = parse_search_replace(model_text)  # Aider's <<<<<<< SEARCH / ======= / >>>>>>> REPLACE

Each block is located independently in the ORIGINAL text (match.py: exact, then
whitespace-tolerant, then indentation-preserving, then partial-line, then '...'-elided), the
located regions must not overlap, and they are applied bottom-up. Any failure raises
`EditError` (a `WorkspaceError`, code "edit_failed") whose message is written for the model:
which block, why, and the closest region of the file ("did you mean"). Nothing is ever
half-applied: these functions are pure, and the workspace writes only a complete result.

The file's newline style (CRLF vs LF, by majority) and its trailing newline are preserved.
An empty SEARCH creates an empty file, or appends to a non-empty one.
Diffs and partial acceptance live in diff.py.
Run the tests: .venv/bin/python -m pytest tests/agent/test_edits*.py -q
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from agent_server.agent.edits.match import (
    Ambiguous,
    FileView,
    NoMatch,
    Replacement,
    closest_region,
    locate,
)
from agent_server.agent.workspace_types import WorkspaceError


@dataclass(frozen=True)
class EditConfig:
    """How edits are applied."""

    # Whole-file replacement is accepted only for files up to this size (bytes, UTF-8): for
    # larger files a rewrite from memory loses lines, so the model must use SEARCH/REPLACE.
    whole_file_max_bytes: int = 20_000
    # The "did you mean" region shown when a block does not match, at most this many lines.
    hint_max_lines: int = 40

    def __post_init__(self) -> None:
        if self.whole_file_max_bytes < 0:
            raise ValueError(
                f"whole_file_max_bytes must be >= 0 (0 disables whole-file replacement), "
                f"got {self.whole_file_max_bytes}"
            )
        if self.hint_max_lines < 1:
            raise ValueError(f"hint_max_lines must be >= 1, got {self.hint_max_lines}")


@dataclass(frozen=True)
class SearchReplace:
    """Replace the text `search` with `replace`. `path` is set by the parser when the model
    named the file above the block; tools that take a path argument ignore it."""

    search: str
    replace: str
    path: str | None = None


class EditError(WorkspaceError):
    """An edit that could not be applied; the file is untouched. `hint` is the closest region
    of the file when a block did not match."""

    code = "edit_failed"

    def __init__(self, message: str, *, block: int | None = None, hint: str | None = None):
        super().__init__(message)
        self.block = block
        self.hint = hint


@dataclass(frozen=True)
class EditPlan:
    text: str
    strategies: list[str]  # per block, how it matched ("exact", "whitespace", "create", ...)


def detect_newline(text: str) -> str:
    """'\\r\\n' when most line ends are CRLF, else '\\n'."""
    crlf = text.count("\r\n")
    return "\r\n" if crlf > text.count("\n") - crlf else "\n"


def _lines(text: str) -> list[str]:
    """LF-normalized lines without terminators; a final newline does not add a line."""
    text = text.replace("\r\n", "\n")
    if text.endswith("\n"):
        text = text[:-1]
    return text.split("\n")


def _blank(text: str) -> bool:
    return not text.strip()


def apply_edits(
    text: str, blocks: Sequence[SearchReplace], config: EditConfig | None = None
) -> str:
    """`text` with every block applied, or EditError (never a partial result)."""
    return plan_edits(text, blocks, config).text


def plan_edits(
    text: str, blocks: Sequence[SearchReplace], config: EditConfig | None = None
) -> EditPlan:
    """Like apply_edits, also saying which strategy located each block."""
    config = config or EditConfig()
    if not blocks:
        raise EditError("No edit blocks were given; give at least one SEARCH/REPLACE pair.")
    newline = detect_newline(text)
    trailing = text.endswith("\n")
    body = text.replace("\r\n", "\n") if newline == "\r\n" else text
    lines = _lines(body) if body else []
    view = FileView(lines)
    if _blank(text) and all(_blank(b.search) for b in blocks):
        if len(blocks) > 1:
            raise EditError("An empty SEARCH creates the file; send a single block for that.")
        return EditPlan(blocks[0].replace, ["create"])
    found: list[tuple[int, Replacement]] = []
    strategies = []
    for index, block in enumerate(blocks):
        replace = _lines(block.replace) if block.replace else []
        if _blank(block.search):
            found.append((index, Replacement(len(lines), len(lines), replace, "append")))
            strategies.append("append")
            continue
        search = _lines(block.search)
        try:
            reps = locate(view, search, replace)
        except Ambiguous as err:
            raise EditError(
                _ambiguous_message(index, len(blocks), err.lines), block=index
            ) from None
        except NoMatch as err:
            raise _no_match(view, index, len(blocks), search, err.reason, config) from None
        found += [(index, r) for r in reps]
        strategies.append(reps[0].strategy)
    # Blocks are located in the original text; overlapping regions cannot both apply.
    found.sort(key=lambda ir: (ir[1].start, ir[1].end, ir[0]))
    for (i, a), (j, b) in zip(found, found[1:], strict=False):
        if b.start < a.end or (a.start == a.end == b.start and a.strategy != "append"):
            raise EditError(
                f"Blocks {i + 1} and {j + 1} overlap (lines {a.start + 1}-{a.end} and "
                f"{b.start + 1}-{b.end}); merge them into one SEARCH/REPLACE block.",
                block=j,
            )
    for _, rep in reversed(found):
        lines[rep.start : rep.end] = rep.lines
    out = "\n".join(lines)
    if lines and (trailing or not text):
        out += "\n"
    if newline == "\r\n":
        out = out.replace("\n", "\r\n")
    return EditPlan(out, strategies)


def _which(index: int, total: int) -> str:
    return "The SEARCH block" if total == 1 else f"SEARCH block {index + 1} of {total}"


def _ambiguous_message(index: int, total: int, starts: list[int]) -> str:
    where = ", ".join(str(s) for s in starts[:10])
    return (
        f"{_which(index, total)} matches {len(starts)} places (starting at lines {where}). "
        "Add a few neighbouring lines to SEARCH so that it matches exactly one place. "
        "Nothing was changed."
    )


def _no_match(
    view: FileView, index: int, total: int, search: list[str], reason: str, config: EditConfig
) -> EditError:
    msg = f"{_which(index, total)} does not match the file. Nothing was changed."
    if reason:
        msg += " " + reason
    region = closest_region(view, search)
    hint = None
    if region is not None and region[2] >= 0.5:
        start, end, ratio = region
        end = min(end, start + config.hint_max_lines)
        hint = "\n".join(view.lines[start:end])
        msg += (
            f"\nDid you mean lines {start + 1}-{end} ({ratio:.0%} similar)?\n```\n{hint}\n```\n"
            "Copy the SEARCH lines exactly as they are in the file (read_file shows them)."
        )
    else:
        msg += " Read the file again and copy the lines to change exactly into SEARCH."
    return EditError(msg, block=index, hint=hint)


def replace_whole_file(old: str, new: str, config: EditConfig | None = None) -> str:
    """`new` as the file's whole text, with the old file's newline style and final newline.
    Refused (EditError) for files above `whole_file_max_bytes`."""
    config = config or EditConfig()
    size = len(old.encode("utf-8", "surrogatepass"))
    if size > config.whole_file_max_bytes:
        raise EditError(
            f"The file has {size} bytes; whole-file replacement is allowed up to "
            f"{config.whole_file_max_bytes} bytes. Change it with SEARCH/REPLACE blocks instead."
        )
    if not old:
        return new
    out = new.replace("\r\n", "\n")
    if old.endswith("\n") and out and not out.endswith("\n"):
        out += "\n"
    elif not old.endswith("\n") and out.endswith("\n"):
        out = out[:-1]
    return out.replace("\n", "\r\n") if detect_newline(old) == "\r\n" else out


_HEAD = re.compile(r"^\s*<{5,9}\s*SEARCH\b.*$")
_DIVIDER = re.compile(r"^\s*={5,9}\s*$")
_TAIL = re.compile(r"^\s*>{5,9}\s*REPLACE\b.*$")
_FORMAT = (
    "Write each edit as:\n<<<<<<< SEARCH\n(lines to find, copied exactly)\n=======\n"
    "(the lines to put there)\n>>>>>>> REPLACE"
)


def parse_search_replace(text: str) -> list[SearchReplace]:
    """The blocks in Aider's SEARCH/REPLACE format; the file name may stand on the line above
    a block (with or without a ``` fence between). Raises EditError on a malformed block."""
    lines = text.replace("\r\n", "\n").split("\n")
    blocks: list[SearchReplace] = []
    i = 0
    while i < len(lines):
        if not _HEAD.match(lines[i]):
            if _DIVIDER.match(lines[i]) or _TAIL.match(lines[i]):
                raise EditError(f"Line {i + 1} has a marker outside a block. {_FORMAT}")
            i += 1
            continue
        path = _path_above(lines, i)
        j = i + 1
        while j < len(lines) and not _DIVIDER.match(lines[j]):
            if _HEAD.match(lines[j]) or _TAIL.match(lines[j]):
                break
            j += 1
        if j >= len(lines) or not _DIVIDER.match(lines[j]):
            raise EditError(f"The block at line {i + 1} has no ======= line. {_FORMAT}")
        k = j + 1
        while k < len(lines) and not _TAIL.match(lines[k]):
            if _HEAD.match(lines[k]) or _DIVIDER.match(lines[k]):
                break
            k += 1
        if k >= len(lines) or not _TAIL.match(lines[k]):
            raise EditError(f"The block at line {i + 1} has no >>>>>>> REPLACE line. {_FORMAT}")
        blocks.append(SearchReplace(_join(lines[i + 1 : j]), _join(lines[j + 1 : k]), path))
        i = k + 1
    if not blocks:
        raise EditError(f"No SEARCH/REPLACE block found. {_FORMAT}")
    return blocks


def _join(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def _path_above(lines: list[str], i: int) -> str | None:
    for line in reversed(lines[max(0, i - 3) : i]):
        name = line.strip().strip("`*").strip()
        if not name or line.strip().startswith("```"):
            continue
        return name if " " not in name and len(name) < 256 else None
    return None
