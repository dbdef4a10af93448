"""The agent's seams over the WebSocket: how a turn reaches the person's editor.

- `WsSteps` (the session layer's EventListener): after the `RecordingSink` stored an event,
  sends what the person should see of it (`assistant.delta` text, `agent.step`,
  `summary.made`).
- `WsReviewer` (the loop's Reviewer): sends `edit.proposed` / `command.approval.request` and
  waits for the person's `edit.outcome` / `command.approval.response`.
- `client_workspace`: a ClientWorkspace whose requests are `tool.request` messages answered
  by the editor's `tool.result`.
Nothing to run; tests/api/ exercise them through a real server.
"""

from __future__ import annotations

import time
from typing import Any

from agent_server.agent.client_workspace import ClientWorkspace, ClientWorkspaceConfig
from agent_server.agent.events import EditDecision, EditProposal, Event
from agent_server.agent.tools import CommandDecision
from agent_server.api.peer import Peer
from agent_server.protocol import messages as p

OBSERVATION_PREVIEW = 2000  # characters of a tool result shown in agent.step


class DeltaBuffer:
    """Streamed text, sent as `assistant.delta` every `interval_s` rather than per token."""

    def __init__(
        self, peer: Peer, session_id: str, reply_id: str | None, interval_s: float = 0.05
    ) -> None:
        self.peer, self.session_id, self.reply_id = peer, session_id, reply_id
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
            await self.peer.send(
                p.AssistantDelta(id=self.reply_id, session_id=self.session_id, text=text)
            )


class WsSteps:
    """The WebSocket's EventListener: what the person sees of each stored event.

    A step's streamed text is flushed first, then a tool call and its observation become
    one `agent.step`, a summary a `summary.made`.
    """

    def __init__(
        self, peer: Peer, session_id: str, deltas: DeltaBuffer, *, reply_id: str | None
    ) -> None:
        self.peer, self.session_id, self.deltas, self.reply_id = peer, session_id, deltas, reply_id
        self._call: dict[str, Any] | None = None  # the tool call awaiting its observation

    async def on_event(self, event: Event) -> None:
        await self.deltas.flush()  # the text of a step reaches the client before its events
        sid, data = self.session_id, event.data
        if event.kind == "tool_call":
            self._call = data
        elif event.kind == "observation" and self._call is not None:
            call, self._call = self._call, None
            text = str((data.get("message") or {}).get("content") or "")
            await self.peer.send(
                p.AgentStep(id=self.reply_id, session_id=sid, tool=str(call.get("tool")),
                            args=dict(call.get("args") or {}),
                            observation=text[:OBSERVATION_PREVIEW])
            )  # fmt: skip
        elif event.kind == "summary":
            await self.peer.send(
                p.SummaryMade(id=self.reply_id, session_id=sid, summary=str(data.get("summary")),
                              tokens_before=data.get("tokens_before"),
                              tokens_after=data.get("tokens_after"))
            )  # fmt: skip


class WsReviewer:
    """The person decides, through their editor; a timeout counts as a refusal."""

    def __init__(self, peer: Peer, session_id: str, timeout_s: float, reply_id: str | None):
        self.peer, self.session_id = peer, session_id
        self.timeout_s, self.reply_id = timeout_s, reply_id

    async def review_edit(self, proposal: EditProposal) -> EditDecision:
        hunks = [p.Hunk(index=h.index, header=h.header, diff=h.diff) for h in proposal.hunks]
        message = p.EditProposed(
            id=self.reply_id, session_id=self.session_id, suggestion_id=proposal.id,
            path=proposal.path, diff=proposal.diff, hunks=hunks,
        )  # fmt: skip
        try:
            outcome: p.EditOutcome = await self.peer.request(
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
        request_id = self.peer.new_request_id()
        message = p.CommandApprovalRequest(
            id=self.reply_id, request_id=request_id, session_id=self.session_id, command=command
        )
        try:
            answer: p.CommandApprovalResponse = await self.peer.request(
                request_id, message, self.timeout_s, kind="approval"
            )
        except TimeoutError:
            return CommandDecision(False, f"no answer within {self.timeout_s:.0f}s")
        return CommandDecision(answer.approved, answer.reason or "")


def client_workspace(
    peer: Peer, session_id: str, timeout_s: float, reply_id: str | None
) -> ClientWorkspace:
    """A workspace whose every call is a `tool.request` to this connection's editor."""

    async def send_request(method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id = peer.new_request_id()
        message = p.ToolRequest(
            id=reply_id, request_id=request_id, session_id=session_id, method=method,
            params=params,
        )  # fmt: skip
        # No timeout here: ClientWorkspace bounds each call (longer for run_command).
        result: p.ToolResult = await peer.request(request_id, message, None, kind="tool")
        if result.error is not None:
            return {"error": result.error.model_dump()}
        return {"result": result.result or {}}

    return ClientWorkspace(send_request, ClientWorkspaceConfig(timeout_s=timeout_s))
