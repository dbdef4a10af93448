"""Text and position helpers: strict LSP positions, cursor context, edits as `TextEdit`s.

    doc = open_document(ls, uri)                  # JSON-RPC InvalidParams if it is not open
    offset = offset_at(doc, position)             # InvalidParams if the position is outside
    edits = line_edits(doc_text, new_text, units) # minimal line-range TextEdits old -> new

pygls clamps out-of-range positions silently (and edits the Position in place); a language
server that wants to tell the client "this position is not in the document" checks first.
Lines end at \\n, \\r\\n or \\r, as LSP defines (str.splitlines also splits at \\f, \\x1c...).
Characters are counted in the negotiated encoding (UTF-16 unless the client chose another).
Tests: tests/lsp/test_text.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from difflib import SequenceMatcher
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.uris import to_fs_path

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer
    from pygls.workspace import TextDocument

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
Units = Callable[[str], int]  # length of a string in the client's position units


def split_lines(text: str) -> list[str]:
    """Lines with their terminators; a text ending in a newline has no empty last entry."""
    return _LINE.findall(text)


def utf16_units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _body(line: str) -> str:
    return line.rstrip("\r\n")


def open_document(ls: LanguageServer, uri: Any) -> TextDocument:
    """The open document at `uri`; unknown documents are the client's error, not a new file."""
    if not isinstance(uri, str) or uri not in ls.workspace.text_documents:
        raise JsonRpcInvalidParams(
            f"unknown document {uri!r}: send textDocument/didOpen before asking about it"
        )
    return ls.workspace.get_text_document(uri)


def units_of(doc: TextDocument) -> Units:
    return doc.position_codec.client_num_units


def offset_at(doc: TextDocument, pos: types.Position) -> int:
    """Index into doc.source of a client position; InvalidParams when it is outside."""
    return offset_in(doc.source, pos, units_of(doc), doc.uri)


def offset_in(text: str, pos: types.Position, units: Units, name: str = "document") -> int:
    lines = split_lines(text)
    line, character = pos.line, pos.character
    if line < 0 or character < 0:
        raise JsonRpcInvalidParams(f"position {line}:{character} is negative")
    # A position on the line after the last newline is valid (column 0: the end of the text).
    last = len(lines) if (not lines or lines[-1].endswith(("\n", "\r"))) else len(lines) - 1
    if line > last:
        raise JsonRpcInvalidParams(
            f"position {line}:{character} is outside {name}: it has {last + 1} lines"
        )
    start = sum(len(x) for x in lines[:line])
    body = _body(lines[line]) if line < len(lines) else ""
    width = units(body)
    if character > width:
        raise JsonRpcInvalidParams(
            f"position {line}:{character} is outside {name}: line {line} has {width} characters"
        )
    count = 0
    for index, char in enumerate(body):  # walk code units up to the character
        if count >= character:
            return start + index
        count += units(char)
    return start + len(body)


def check_range(doc: TextDocument, rng: types.Range) -> tuple[int, int]:
    start, end = offset_at(doc, rng.start), offset_at(doc, rng.end)
    if end < start:
        raise JsonRpcInvalidParams(f"range end {rng.end} comes before its start {rng.start}")
    return start, end


def end_position(text: str, units: Units) -> types.Position:
    lines = split_lines(text)
    if not lines:
        return types.Position(0, 0)
    if lines[-1].endswith(("\n", "\r")):
        return types.Position(len(lines), 0)
    return types.Position(len(lines) - 1, units(lines[-1]))


def line_edits(old: str, new: str, units: Units) -> list[types.TextEdit]:
    """TextEdits (whole lines, ranges in `old`) that turn `old` into `new`."""
    a, b = split_lines(old), split_lines(new)
    edits: list[types.TextEdit] = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        start = types.Position(i1, 0)
        if i2 < len(a) or not a or a[-1].endswith(("\n", "\r")):
            end = types.Position(i2, 0)
        else:  # the replaced run reaches a last line without a newline: end at its end
            end = types.Position(i2 - 1, units(a[-1]))
        edits.append(types.TextEdit(types.Range(start, end), "".join(b[j1:j2])))
    return edits


def apply_text_edits(text: str, edits: list[types.TextEdit], units: Units = utf16_units) -> str:
    """`text` with non-overlapping edits applied (as a client would); used by tests."""
    spans = [(offset_in(text, e.range.start, units), offset_in(text, e.range.end, units), e)
             for e in edits]  # fmt: skip
    for start, end, edit in sorted(spans, key=lambda s: s[0], reverse=True):
        text = text[:start] + edit.new_text + text[end:]
    return text


def uri_path(uri: str, root: str) -> str | None:
    """Workspace-relative '/'-path of a file URI under `root`; None when outside it."""
    from pathlib import Path

    fs = to_fs_path(uri)
    if fs is None:
        return None
    try:
        rel = Path(fs).resolve().relative_to(Path(root).resolve())
    except ValueError:
        return None
    return rel.as_posix()
