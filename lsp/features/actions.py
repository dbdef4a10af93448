"""textDocument/codeAction + codeAction/resolve: "Fix with Apprentice", "Edit with Apprentice".

codeAction is cheap (no model call): "Fix with Apprentice" (quickfix) when diagnostics
touch the range, "Edit with Apprentice" (refactor.rewrite) for a non-empty selection. Their
`data` says what to do; resolve runs one agent turn on it (work-done progress while it
runs) and returns the `WorkspaceEdit` plus the command `apprentice.accept`, which the
client runs after applying the edit. A client without resolve support for `edit` (and every
client in remote mode) gets the same actions as `apprentice.chat` commands instead,
applied with workspace/applyEdit.
"""

from __future__ import annotations

import asyncio
import posixpath
from typing import TYPE_CHECKING, Any, Literal

from lsprotocol import types
from lsprotocol.converters import get_converter
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

from agent_server.protocol.messages import Diagnostic, EditorContext, Selection
from agent_server.protocol.messages import Position as Pos
from agent_server.session.prompts import task_text
from lsp.editors import Progress, ResolveEditor
from lsp.features.errors import RequestFailed, request_errors
from lsp.followups import EditFollowUp
from lsp.text import check_range, open_document
from lsp.workspace_edit import path_uri

if TYPE_CHECKING:
    from lsp.server import ApprenticeServer

_CONVERTER = get_converter()
FIX, EDIT = "Fix with Apprentice", "Edit with Apprentice"
CONTENT_MODIFIED = -32801
SEVERITY = {1: "error", 2: "warning", 3: "information", 4: "hint"}
TASKS = {
    "fix": "Fix the problems the diagnostics below report in {path}. Change only what the "
    "fix needs.",
    "edit": "Improve the selected code in {path}: fix bugs, simplify it, keep its behaviour "
    "and its interface. Change only the selection.",
}


class ActionData(BaseModel):
    """What a resolve needs; travels in CodeAction.data."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["fix", "edit"]
    uri: str
    version: int
    range: list[int] = Field(min_length=4, max_length=4)  # start line, char, end line, char
    diagnostics: list[dict[str, Any]] = Field(default_factory=list, max_length=200)


def _rng(r: list[int]) -> types.Range:
    return types.Range(types.Position(r[0], r[1]), types.Position(r[2], r[3]))


def _overlaps(a: types.Range, b: types.Range) -> bool:
    return (a.start.line, a.start.character) <= (b.end.line, b.end.character) and (
        b.start.line, b.start.character) <= (a.end.line, a.end.character)  # fmt: skip


def _wanted(kind: str, only: Any) -> bool:
    return not only or any(kind == k or kind.startswith(f"{k}.") for k in only)


def _supports_resolve(ls: ApprenticeServer) -> bool:
    text = ls.client_capabilities.text_document
    caps = text.code_action if text is not None else None
    props = caps.resolve_support.properties if caps and caps.resolve_support else []
    return "edit" in props


def editor_context(ls: ApprenticeServer, data: ActionData, path: str) -> EditorContext:
    doc = ls.workspace.get_text_document(data.uri)
    rng = _rng(data.range)
    start, end = check_range(doc, rng)
    selection = None
    if end > start:
        selection = Selection(start=Pos(line=rng.start.line, character=rng.start.character),
                              end=Pos(line=rng.end.line, character=rng.end.character),
                              text=doc.source[start:end][:100_000])  # fmt: skip
    diagnostics = [
        Diagnostic(line=int(d.get("range", {}).get("start", {}).get("line", rng.start.line)),
                   severity=SEVERITY.get(d.get("severity") or 1, "error"),  # type: ignore[arg-type]
                   message=str(d.get("message", ""))[:8000],
                   source=str(d["source"])[:200] if d.get("source") else None)
        for d in data.diagnostics
    ]  # fmt: skip
    return EditorContext(path=path, language=doc.language_id or None, selection=selection,
                         diagnostics=diagnostics)  # fmt: skip


def register(server: ApprenticeServer) -> None:
    kinds = [types.CodeActionKind.QuickFix, types.CodeActionKind.RefactorRewrite]
    # Remote mode runs code actions as commands (see lsp/remote.py): nothing to resolve.
    local = server.config.mode == "local"
    options = types.CodeActionOptions(code_action_kinds=kinds, resolve_provider=local)

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, options)
    def code_action(ls: ApprenticeServer, params: types.CodeActionParams) -> list[Any]:
        doc = open_document(ls, params.text_document.uri)
        start, end = check_range(doc, params.range)
        if not ls.in_root(doc.uri):  # asked on every cursor move: no actions, not an error
            return []
        only = params.context.only
        found = [d for d in params.context.diagnostics if _overlaps(d.range, params.range)]
        r = params.range
        base = {
            "uri": doc.uri,
            "version": doc.version or 0,
            "range": [r.start.line, r.start.character, r.end.line, r.end.character],
        }
        offers: list[tuple[str, types.CodeActionKind, dict[str, Any]]] = []
        if found and _wanted(types.CodeActionKind.QuickFix, only):
            diags = [_CONVERTER.unstructure(d) for d in found]
            offers.append((FIX, types.CodeActionKind.QuickFix,
                           {**base, "kind": "fix", "diagnostics": diags}))  # fmt: skip
        if end > start and _wanted(types.CodeActionKind.RefactorRewrite, only):
            offers.append((EDIT, types.CodeActionKind.RefactorRewrite, {**base, "kind": "edit"}))
        resolvable = local and _supports_resolve(ls)
        actions: list[Any] = []
        for title, kind, data in offers:
            action = types.CodeAction(title, kind=kind, diagnostics=found or None)
            if resolvable:
                action.data = data
            else:
                action.command = types.Command(
                    title, "apprentice.chat", arguments=[{"action": data}]
                )
            actions.append(action)
        return actions

    @server.feature(types.CODE_ACTION_RESOLVE)
    async def resolve(ls: ApprenticeServer, action: types.CodeAction) -> types.CodeAction:
        if not local:
            raise RequestFailed("this server runs code actions as commands (remote mode)")
        try:
            data = ActionData.model_validate(action.data)
        except ValidationError as exc:
            raise JsonRpcInvalidParams(
                f"codeAction/resolve: data is not an Apprentice action ({exc.error_count()} "
                "problems); resolve only actions this server returned"
            ) from None
        edit, ids = await run_action(ls, data, action.title)
        action.edit = edit
        action.command = types.Command(
            "Apprentice: applied", "apprentice.accept", arguments=[{"suggestionIds": ids}]
        )
        return action


async def run_action(
    ls: ApprenticeServer, data: ActionData, title: str
) -> tuple[types.WorkspaceEdit, list[str]]:
    """One agent turn for a code action; its edits as a WorkspaceEdit (not applied)."""
    doc = open_document(ls, data.uri)
    if doc.version is not None and doc.version != data.version:
        raise JsonRpcException(
            f"{data.uri} changed since the code action was offered (version {data.version}, "
            f"now {doc.version}); ask for code actions again", code=CONTENT_MODIFIED,
        )  # fmt: skip
    path = ls.path_of(data.uri)
    context = editor_context(ls, data, path)
    task = task_text(TASKS[data.kind].format(path=path), context)
    progress = Progress(ls, title)
    editor = ResolveEditor(ls, ls.root, progress)
    await progress.begin("thinking", cancel=asyncio.current_task())
    try:
        async with request_errors(title):
            result = await ls.host.run_turn(task, editor, session_id=None, title=title)
    finally:
        progress.end("done")
    edit = editor.edit()
    if edit is None:
        raise RequestFailed(f"Apprentice proposed no edit ({result.status}: {result.message})")
    ids = [p.id for p in editor.proposals]
    changed = editor.workspace.changed()
    # The document's text once the client applied the edit: a didChange to it accepts.
    expected = {data.uri: changed[path][1]} if path in changed else {}
    # Once accepted, each edit is followed up on its file's text before and after the turn.
    follow = {}
    for p in editor.proposals:
        name = posixpath.normpath(p.path)
        if name in changed:
            before, after = changed[name]
            follow[p.id] = EditFollowUp(p.id, path_uri(ls.root, name), before, after)
    ls.outcomes.offered(data.uri, "action", ids, expected=expected, follow=follow)
    async with request_errors("recording the shown outcome"):
        for sid in ids:
            await ls.outcomes.write(sid, "shown")
    return edit, ids
