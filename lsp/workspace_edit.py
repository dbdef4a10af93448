"""Proposed file texts -> an LSP `WorkspaceEdit` the client can apply.

    edit = workspace_edit(ls, root, {"a.py": (before, after)}, versions={"a.py": 7})

Edits are whole-line ranges computed from the text the agent started from (lsp/text.py
`line_edits`), so they only touch what changed. With `documentChanges` support (Neovim,
VS Code, Helix, eglot) each file is a `TextDocumentEdit` carrying the buffer version the
agent read, so a client whose buffer moved on refuses the edit instead of corrupting it;
a new file is a `CreateFile` first when the client supports resource operations.
Without `documentChanges` the plain `changes` map is used. Tests: tests/lsp/test_text.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types
from pygls.uris import from_fs_path

from lsp.text import line_edits

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

Changes = dict[str, tuple[str | None, str]]  # path -> (text before or None if new, after)


def path_uri(root: str, path: str) -> str:
    uri = from_fs_path(str(Path(root) / path))
    assert uri is not None
    return uri


def _caps(ls: LanguageServer) -> tuple[bool, bool]:
    """(documentChanges supported, file creation supported)."""
    ws = ls.client_capabilities.workspace
    edit_caps = ws.workspace_edit if ws is not None else None
    if edit_caps is None or not edit_caps.document_changes:
        return False, False
    ops = edit_caps.resource_operations or []
    return True, types.ResourceOperationKind.Create in ops


def workspace_edit(
    ls: LanguageServer, root: str, changes: Changes, versions: dict[str, int | None]
) -> types.WorkspaceEdit:
    units = ls.workspace.position_codec.client_num_units
    document_changes, can_create = _caps(ls)
    plain: dict[str, list[types.TextEdit]] = {}
    ops: list[types.TextDocumentEdit | types.CreateFile] = []
    for path, (before, after) in changes.items():
        uri = path_uri(root, path)
        if before is None:
            whole = types.Range(types.Position(0, 0), types.Position(0, 0))
            edits = [types.TextEdit(whole, after)]
            if can_create:
                options = types.CreateFileOptions(overwrite=False, ignore_if_exists=True)
                ops.append(types.CreateFile(uri=uri, options=options))
        else:
            edits = line_edits(before, after, units)
        if not edits:
            continue
        plain[uri] = edits
        doc_id = types.OptionalVersionedTextDocumentIdentifier(uri, versions.get(path))
        ops.append(types.TextDocumentEdit(doc_id, list(edits)))  # type: ignore[arg-type]
    if document_changes:
        return types.WorkspaceEdit(document_changes=ops)
    return types.WorkspaceEdit(changes=plain)
