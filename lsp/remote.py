"""`RemoteHost`: the language server as an editor of a running agent server (/v1/ws).

    apprentice lsp --server ws://127.0.0.1:8765/v1/ws   # token: APPRENTICE_TOKEN or the file

The agent server does the model calls and stores suggestions and outcomes; this process
plays the editor's part of the WebSocket protocol (agent_server/protocol/messages.py): it
answers `tool.request`s from the editor's buffers and the disk (lsp/overlay.py), turns
`edit.proposed` diffs into the LSP side's review (workspace/applyEdit in chat), asks the
person about commands, and sends outcomes as `edit.outcome` (acknowledged when stored),
follow-ups (persisted / reverted / edited_after_accept, and `written`) included. A diff
that does not fit the buffer is rejected with an `[editor] ` reason: nobody saw it.
One reader task routes the server's messages: replies by their `id`, a turn's messages by
its session. The difference from the in-process mode: code actions run as commands with
workspace/applyEdit (a resolve would have to tell the waiting agent "accepted" before the
person decided). Tests: tests/lsp/test_remote.py, test_outcome_labels.py against a real
agent server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import Any

from agent_server.agent.client_workspace import answer_request
from agent_server.agent.edits.diff import split_hunks
from agent_server.agent.events import EditProposal
from agent_server.models.base import ModelError
from agent_server.protocol import messages as p
from agent_server.protocol.client import ProtocolClient, tool_result_message
from feedback.vocab import DECISION_KINDS, EDITOR_REASON_PREFIX, adapter_version
from lsp.config import LspConfig
from lsp.host import (
    Editor,
    InlineRequest,
    InlineSuggestion,
    OutcomeRecord,
    TurnResult,
    UnknownSuggestionError,
    step_line,
)
from lsp.patch import PatchError, apply_unified

log = logging.getLogger(__name__)


class RemoteError(ModelError):
    """The agent server answered a request with an `error` message."""

    code = "agent_server_error"


class RemoteHost:
    def __init__(self, config: LspConfig, root: str) -> None:
        self.config, self.root = config, root
        self.client: ProtocolClient | None = None
        self._lock = asyncio.Lock()
        self._replies: dict[str, asyncio.Future[Any]] = {}  # message id -> reply
        self._turns: dict[str, tuple[Editor, asyncio.Future[p.TurnDone]]] = {}
        self._decided: set[str] = set()  # suggestions whose decision the server has
        self._reader: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        async with self._lock:
            if self.client is not None and self._reader is not None and not self._reader.done():
                return
            self.client = await ProtocolClient.connect(
                self.config.server_url, self.config.token or None, client="apprentice-lsp"
            )
            self._reader = asyncio.ensure_future(self._read())
            log.info("connected to %s (model %s)", self.config.server_url,
                     self.client.welcome.model)  # fmt: skip

    async def _request(self, message: Any, reply: type[Any]) -> Any:
        await self.start()
        assert self.client is not None
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._replies[message.id] = future
        try:
            await self.client.send(message)
            answer = await future
        finally:
            self._replies.pop(message.id, None)
        if isinstance(answer, p.Error):
            if answer.code == "suggestion_not_found":
                raise UnknownSuggestionError(answer.message)
            raise RemoteError(f"{answer.code}: {answer.message}")
        if not isinstance(answer, reply):
            raise RemoteError(f"expected {reply.__name__}, got {type(answer).__name__}")
        return answer

    async def _read(self) -> None:
        assert self.client is not None
        try:
            while True:
                message = await self.client.recv()
                self._route(message)
        except Exception as exc:  # the connection ended: fail what waits on it
            log.warning("agent server connection closed: %s", exc)
            for future in [*self._replies.values(), *(f for _, f in self._turns.values())]:
                if not future.done():
                    future.set_exception(RemoteError(f"agent server connection lost: {exc}"))

    def _route(self, message: Any) -> None:
        session = getattr(message, "session_id", None)
        turn = self._turns.get(session) if session else None
        if isinstance(message, p.TurnDone) and turn is not None:
            if not turn[1].done():
                turn[1].set_result(message)
        elif isinstance(message, (p.ToolRequest, p.EditProposed, p.CommandApprovalRequest)):
            if turn is not None:
                self._spawn(self._serve(message, turn[0]))
        elif isinstance(message, p.AgentStep) and turn is not None:
            self._spawn(turn[0].on_step(step_line(message.tool, message.args)))
        elif message.id is not None and message.id in self._replies:
            future = self._replies[message.id]
            if not future.done():
                future.set_result(message)

    def _spawn(self, work: Any) -> None:
        task = asyncio.ensure_future(work)  # never block the reader: it routes the answers
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, message: Any, editor: Editor) -> None:
        assert self.client is not None
        try:
            if isinstance(message, p.ToolRequest):
                reply = await answer_request(editor.workspace, message.method, message.params)
                await self.client.send(tool_result_message(message.request_id, reply))
            elif isinstance(message, p.CommandApprovalRequest):
                decision = await editor.approve_command(message.command)
                await self.client.send(p.CommandApprovalResponse(
                    request_id=message.request_id, approved=decision.approved,
                    reason=decision.reason or None))  # fmt: skip
            else:
                await self._review(message, editor)
        except Exception:
            log.exception("could not answer %s", type(message).__name__)

    async def _review(self, message: p.EditProposed, editor: Editor) -> None:
        before = await editor.workspace.current(message.path)
        try:
            after = apply_unified(before or "", message.diff)
        except PatchError as exc:
            reason = f"{EDITOR_REASON_PREFIX}diff did not apply: {exc}"  # nobody saw it
            await self._send_decision(message.suggestion_id, "rejected", reason)
            return
        proposal = EditProposal(message.suggestion_id, 0, message.path, before or "", after,
                                message.diff, split_hunks(before or "", after))  # fmt: skip
        decision = await editor.review_edit(proposal)
        if message.suggestion_id not in self._decided:  # the editor may have sent it already
            await self._send_decision(message.suggestion_id, decision.verdict, decision.reason)

    async def _send_decision(self, suggestion_id: str, verdict: str, reason: str) -> None:
        await self.record_outcome(OutcomeRecord(suggestion_id, verdict, f"lsp:{suggestion_id}:"
                                                f"decision", reason=reason or None))  # fmt: skip

    async def complete_inline(self, request: InlineRequest) -> InlineSuggestion:
        message = p.CompletionRequest(
            id=uuid.uuid4().hex, path=request.path, language=request.language[:64],
            prefix=request.prefix, suffix=request.suffix, max_tokens=request.max_tokens,
        )  # fmt: skip
        answer = await self._request(message, p.CompletionSuggestion)
        return InlineSuggestion(answer.suggestion_id, answer.text, answer.adapter)

    async def run_turn(
        self, task: str, editor: Editor, *, session_id: str | None, title: str
    ) -> TurnResult:
        if session_id is None:
            create = p.SessionCreate(id=uuid.uuid4().hex, title=title[:256],
                                     workspace=self.root[:4096])  # fmt: skip
            session_id = (await self._request(create, p.SessionInfo)).session_id
        assert session_id is not None and self.client is not None
        done: asyncio.Future[p.TurnDone] = asyncio.get_running_loop().create_future()
        self._turns[session_id] = (editor, done)
        try:
            await self.client.send(p.UserMessage(id=uuid.uuid4().hex, session_id=session_id,
                                                 text=task))  # fmt: skip
            result = await done
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await self.client.send(p.Cancel(session_id=session_id))
            raise
        finally:
            self._turns.pop(session_id, None)
        return TurnResult(result.status, result.message, session_id, result.usage.model_calls)

    async def record_outcome(self, outcome: OutcomeRecord) -> None:
        kind = outcome.kind
        if kind in DECISION_KINDS:  # the server has the person's decision now
            self._decided.add(outcome.suggestion_id)
        message = p.EditOutcome(
            id=uuid.uuid4().hex, suggestion_id=outcome.suggestion_id, outcome=kind,  # type: ignore[arg-type]
            client_event_id=outcome.event_id[:128], reason=outcome.reason,
            accepted_length=outcome.accepted_length, final_text=outcome.final_text,
            accepted_hunks=outcome.accepted_part,
        )  # fmt: skip
        await self._request(message, p.OutcomeAck)

    async def status(self) -> dict[str, Any]:
        await self.start()
        assert self.client is not None
        welcome = self.client.welcome
        return {"mode": "remote", "server": self.config.server_url, "model": welcome.model,
                "adapter": welcome.adapter, "adapterVersion": adapter_version(welcome.adapter),
                "agentServer": welcome.server, "workspace": self.root}  # fmt: skip

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._reader is not None:
            self._reader.cancel()
        if self.client is not None:
            with contextlib.suppress(Exception):
                await self.client.close()
