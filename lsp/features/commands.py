"""workspace/executeCommand: apprentice.chat, .accept, .reject and .status.

  apprentice.chat   [{"message": "...", "uri"?: ..., "range"?: {...}, "newSession"?: false}]
                    one agent turn with $/progress reports; each proposed edit goes to the
                    editor with workspace/applyEdit (outcome `accepted`, or `rejected` with
                    an `[editor] ` reason when the editor did not apply it); the turn
                    continues this connection's chat session unless newSession.
                    Returns {status, message, sessionId, applied, rejected}.
  apprentice.accept [{"suggestionId": id, "acceptedLength"?: n} | {"suggestionIds": [...]}]
                    accepted, or partially_accepted when acceptedLength is below what was
                    offered; `eventId` (optional) is the client's idempotency key. Followed
                    up after the settle time (persisted / reverted / edited_after_accept;
                    a partial accept also `written`).
  apprentice.reject [{"suggestionId" | "suggestionIds", "reason"?: "dismissed"}]
                    the person's rejection, also of a chat edit already applied (its
                    follow-up is cancelled). Followed up with `written` after the settle
                    time (lsp/followups.py: what the person wrote at its place instead).
  apprentice.status []  -> {mode, server, model, adapter, adapterVersion, database, ...}
Arguments are validated; a bad one is an InvalidParams error that says what is expected.
"""

from __future__ import annotations

import asyncio
from typing import Any

from lsprotocol import types
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pygls.exceptions import JsonRpcInvalidParams

from agent_server.session.prompts import task_text
from ground import __version__
from lsp.editors import ChatEditor, Progress
from lsp.features.actions import TASKS, ActionData, editor_context
from lsp.features.errors import request_errors
from lsp.server import ApprenticeServer  # at runtime: pygls reads command type hints
from lsp.text import open_document


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ChatArgs(_Args):
    message: str = Field(default="", max_length=100_000)
    uri: str | None = None
    range: dict[str, Any] | None = None
    new_session: bool = Field(default=False, alias="newSession")
    action: ActionData | None = None  # a code action run as a command (no resolve support)

    @model_validator(mode="after")
    def _something_to_do(self) -> ChatArgs:
        if not self.message.strip() and self.action is None:
            raise ValueError("give a non-empty `message`")
        return self


class OutcomeArgs(_Args):
    suggestion_id: str | None = Field(default=None, alias="suggestionId", max_length=64)
    suggestion_ids: list[str] = Field(default_factory=list, alias="suggestionIds", max_length=100)
    accepted_length: int | None = Field(default=None, alias="acceptedLength", ge=0)
    reason: str | None = Field(default=None, max_length=8000)
    event_id: str | None = Field(default=None, alias="eventId", min_length=1, max_length=100)

    @property
    def ids(self) -> list[str]:
        return ([self.suggestion_id] if self.suggestion_id else []) + self.suggestion_ids

    @model_validator(mode="after")
    def _names_one(self) -> OutcomeArgs:
        if not self.ids:
            raise ValueError("name the suggestion: `suggestionId` or `suggestionIds`")
        return self


def parse(model: type[_Args], command: str, args: tuple[Any, ...]) -> Any:
    value = args[0] if len(args) == 1 else None
    if isinstance(value, str) and model is ChatArgs:
        value = {"message": value}
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'argument'}: {e['msg']}"
                             for e in exc.errors())  # fmt: skip
        raise JsonRpcInvalidParams(
            f"{command} takes one object argument ({model.__name__}): {problems}"
        ) from None


def register(server: ApprenticeServer) -> None:
    @server.command("apprentice.chat")
    async def chat(ls: ApprenticeServer, *args: Any) -> dict[str, Any]:
        a: ChatArgs = parse(ChatArgs, "apprentice.chat", args)
        if a.action is not None:  # a code action for a client without resolve support
            path = ls.path_of(open_document(ls, a.action.uri).uri)
            task = task_text(TASKS[a.action.kind].format(path=path),
                             editor_context(ls, a.action, path))  # fmt: skip
            session, title = None, f"{a.action.kind} {path}"
        else:
            context = _context(ls, a)
            task = task_text(a.message, context) if context is not None else a.message
            session = None if a.new_session else ls.chat_session
            title = a.message[:80]
        async with ls.chat_lock:  # one turn at a time on a connection
            progress = Progress(ls, "Apprentice")
            editor = ChatEditor(ls, ls.root, progress)
            await progress.begin("thinking", cancel=asyncio.current_task())
            status = "error"
            try:
                async with request_errors("apprentice.chat"):
                    result = await ls.host.run_turn(task, editor, session_id=session, title=title)
                status = result.status
            finally:
                progress.end(status)
            if a.action is None:
                ls.chat_session = result.session_id
        ls.window_show_message(
            types.ShowMessageParams(types.MessageType.Info, f"Apprentice: {result.message}")
        )
        return {"status": result.status, "message": result.message,
                "sessionId": result.session_id, "applied": editor.applied,
                "rejected": editor.rejected}  # fmt: skip

    @server.command("apprentice.accept")
    async def accept(ls: ApprenticeServer, *args: Any) -> dict[str, Any]:
        a: OutcomeArgs = parse(OutcomeArgs, "apprentice.accept", args)
        # Before any await: a newer request cannot supersede it, and the document is the
        # one the accept was made in.
        follow_ups = ls.outcomes.accepting(a.ids, a.accepted_length)
        kinds = []
        async with request_errors("apprentice.accept"):
            for sid in a.ids:
                offered = ls.outcomes.offered_length(sid)
                partial = a.accepted_length is not None and offered is not None and (
                    a.accepted_length < offered)  # fmt: skip
                kind = "partially_accepted" if partial else "accepted"
                await _write(ls, sid, kind, a, accepted_length=a.accepted_length)
                kinds.append(kind)
        for item in follow_ups:  # once the accepts are stored: a follow-up comes after them
            ls.outcomes.follow.track(item)
        return {"recorded": kinds}

    @server.command("apprentice.reject")
    async def reject(ls: ApprenticeServer, *args: Any) -> dict[str, Any]:
        a: OutcomeArgs = parse(OutcomeArgs, "apprentice.reject", args)
        # Also of a chat edit already applied: the person's no. Before any await, like accept.
        written = ls.outcomes.rejecting(a.ids)
        async with request_errors("apprentice.reject"):
            for sid in a.ids:
                await _write(ls, sid, "rejected", a, reason=a.reason or "dismissed")
        for item in written:  # once the rejections are stored: `written` comes after them
            ls.outcomes.follow.track(item)
        return {"recorded": ["rejected"] * len(a.ids)}

    @server.command("apprentice.status")
    async def status(ls: ApprenticeServer, *args: Any) -> dict[str, Any]:
        async with request_errors("apprentice.status"):
            info = await ls.host.status()
        return {**info, "version": __version__, "chatSession": ls.chat_session}


async def _write(ls: ApprenticeServer, sid: str, kind: str, a: OutcomeArgs, **fields: Any) -> None:
    if a.event_id is not None:  # the client's own idempotency key, one per suggestion
        from lsp.host import OutcomeRecord

        key = a.event_id if len(a.ids) == 1 else f"{a.event_id}:{sid}"
        await ls.host.record_outcome(OutcomeRecord(sid, kind, key, **fields))
    else:
        await ls.outcomes.write(sid, kind, **fields)


def _context(ls: ApprenticeServer, a: ChatArgs) -> Any:
    """The editor context of a chat message: the open file and the selection, if given."""
    if a.uri is None:
        return None
    doc = open_document(ls, a.uri)
    path = ls.path_of(doc.uri)
    r = a.range or {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}
    try:
        span = [r["start"]["line"], r["start"]["character"], r["end"]["line"],
                r["end"]["character"]]  # fmt: skip
        data = ActionData(kind="edit", uri=doc.uri, version=doc.version or 0, range=span)
    except (KeyError, TypeError, ValidationError):
        raise JsonRpcInvalidParams(
            "apprentice.chat: `range` must be an LSP Range {start: {line, character}, end: ...}"
        ) from None
    return editor_context(ls, data, path)
