"""The agent's seams implemented over the database and the WebSocket.

- `DbSink` (the loop's EventSink): stores every trajectory event in `session_events` before
  forwarding what the person should see (`agent.step`, `summary.made`), and stores the
  completion behind each edit proposal as a `suggestions` row (token ids, logprobs, adapter,
  the prompt) — the loop calls it before the proposal reaches the reviewer.
- `WsReviewer` (the loop's Reviewer): sends `edit.proposed` / `command.approval.request` and
  waits for the person's `edit.outcome` / `command.approval.response`.
- `client_workspace`: a ClientWorkspace whose requests are `tool.request` messages answered
  by the editor's `tool.result`.
Nothing to run; tests/api/ exercise them through a real server.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agent_server.agent.client_workspace import ClientWorkspace, ClientWorkspaceConfig
from agent_server.agent.events import EditDecision, EditProposal, Event
from agent_server.agent.tools import CommandDecision
from agent_server.models.base import Completion, Message, Sampling
from agent_server.protocol import messages as p

if TYPE_CHECKING:
    from agent_server.api.connection import Connection
    from agent_server.api.sessions import LiveSession
    from agent_server.session.store import Store

OBSERVATION_PREVIEW = 2000  # characters of a tool result shown in agent.step


class DeltaBuffer:
    """Streamed text, sent as `assistant.delta` every `interval_s` rather than per token."""

    def __init__(
        self, conn: Connection, session_id: str, reply_id: str | None, interval_s: float = 0.05
    ) -> None:
        self.conn, self.session_id, self.reply_id = conn, session_id, reply_id
        self.interval_s = interval_s
        self._parts: list[str] = []
        self._last = time.monotonic()

    async def add(self, text: str) -> None:
        self._parts.append(text)
        if time.monotonic() - self._last >= self.interval_s:
            await self.flush()

    async def flush(self) -> None:
        self._last = time.monotonic()
        if self._parts:
            text, self._parts = "".join(self._parts), []
            await self.conn.send(
                p.AssistantDelta(id=self.reply_id, session_id=self.session_id, text=text)
            )


class DbSink:
    def __init__(
        self, store: Store, live: LiveSession, deltas: DeltaBuffer, *, reply_id: str | None
    ) -> None:
        self.store, self.live, self.reply_id = store, live, reply_id
        self.deltas = deltas
        self.prompt: Callable[[], list[Message]] = list
        self.sampling: Sampling | None = None
        self._call: dict[str, Any] | None = None  # the tool call awaiting its observation

    async def emit(self, event: Event) -> None:
        await self.deltas.flush()  # the text of a step reaches the client before its events
        sid = self.live.row.id
        await self.store.append_event(sid, event)
        self.live.events.append(event)
        conn, data = self.live.conn, event.data
        if event.kind == "tool_call":
            self._call = data
        elif event.kind == "observation" and self._call is not None:
            call, self._call = self._call, None
            text = str((data.get("message") or {}).get("content") or "")
            await conn.send(
                p.AgentStep(id=self.reply_id, session_id=sid, tool=str(call.get("tool")),
                            args=dict(call.get("args") or {}),
                            observation=text[:OBSERVATION_PREVIEW])
            )  # fmt: skip
        elif event.kind == "summary":
            await conn.send(
                p.SummaryMade(id=self.reply_id, session_id=sid, summary=str(data.get("summary")),
                              tokens_before=data.get("tokens_before"),
                              tokens_after=data.get("tokens_after"))
            )  # fmt: skip

    async def record_suggestion(self, completion: Completion, proposal: EditProposal) -> None:
        await self.store.record_suggestion(
            suggestion_id=proposal.id,
            kind="edit",
            completion=completion,
            prompt=self.prompt(),
            proposed=proposal.diff,
            session_id=self.live.row.id,
            file_path=proposal.path,
            sampling=self.sampling,
            latency_s=None,
        )


class WsReviewer:
    """The person decides, through their editor; a timeout counts as a refusal."""

    def __init__(self, conn: Connection, session_id: str, timeout_s: float, reply_id: str | None):
        self.conn, self.session_id = conn, session_id
        self.timeout_s, self.reply_id = timeout_s, reply_id

    async def review_edit(self, proposal: EditProposal) -> EditDecision:
        hunks = [p.Hunk(index=h.index, header=h.header, diff=h.diff) for h in proposal.hunks]
        message = p.EditProposed(
            id=self.reply_id, session_id=self.session_id, suggestion_id=proposal.id,
            path=proposal.path, diff=proposal.diff, hunks=hunks,
        )  # fmt: skip
        try:
            outcome: p.EditOutcome = await self.conn.request(
                proposal.id, message, self.timeout_s, kind="decision"
            )
        except TimeoutError:
            return EditDecision.reject(f"no decision within {self.timeout_s:.0f}s")
        if outcome.outcome == "accepted":
            return EditDecision.accept()
        if outcome.outcome == "partially_accepted" and outcome.accepted_hunks:
            return EditDecision.partial(outcome.accepted_hunks)
        return EditDecision.reject(outcome.reason or "")

    async def approve_command(self, command: str) -> CommandDecision:
        request_id = self.conn.new_request_id()
        message = p.CommandApprovalRequest(
            id=self.reply_id, request_id=request_id, session_id=self.session_id, command=command
        )
        try:
            answer: p.CommandApprovalResponse = await self.conn.request(
                request_id, message, self.timeout_s, kind="approval"
            )
        except TimeoutError:
            return CommandDecision(False, f"no answer within {self.timeout_s:.0f}s")
        return CommandDecision(answer.approved, answer.reason or "")


def client_workspace(
    conn: Connection, session_id: str, timeout_s: float, reply_id: str | None
) -> ClientWorkspace:
    """A workspace whose every call is a `tool.request` to this connection's editor."""

    async def send_request(method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id = conn.new_request_id()
        message = p.ToolRequest(
            id=reply_id, request_id=request_id, session_id=session_id, method=method,
            params=params,
        )  # fmt: skip
        # No timeout here: ClientWorkspace bounds each call (longer for run_command).
        result: p.ToolResult = await conn.request(request_id, message, None, kind="tool")
        if result.error is not None:
            return {"error": result.error.model_dump()}
        return {"result": result.result or {}}

    return ClientWorkspace(send_request, ClientWorkspaceConfig(timeout_s=timeout_s))
