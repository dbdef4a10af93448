"""A Python client of /v1/ws: `apprentice chat`, the tests and bench/ws_load.py speak through it.

    client = await ProtocolClient.connect("ws://127.0.0.1:8765/v1/ws", token)
    info = await client.create_session()
    done = await client.run_turn(info.session_id, "Fix the typo in a.py",
                                 workspace=LocalWorkspace("."), review=accept_all)
    await client.close()

`run_turn` plays the editor's part: it answers `tool.request`s from a local Workspace
(`client_workspace.answer_request`), asks `review` about each `edit.proposed` and sends the
`edit.outcome` (with a fresh client_event_id), asks `approve` about commands, and returns
when `turn.done` arrives. Every server message is validated against protocol.py.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

from agent_server.agent.client_workspace import answer_request
from agent_server.protocol import messages as p


@dataclass(frozen=True)
class Decision:
    """What the person did with an edit proposal."""

    outcome: str = "accepted"  # accepted | rejected | partially_accepted
    reason: str | None = None
    hunks: list[int] | None = None


@dataclass
class TurnLog:
    done: p.TurnDone
    messages: list[Any] = field(default_factory=list)  # every server message of the turn

    def of(self, kind: type[Any]) -> list[Any]:
        return [m for m in self.messages if isinstance(m, kind)]


Review = Callable[[p.EditProposed], Decision | Awaitable[Decision]]
Approve = Callable[[p.CommandApprovalRequest], bool | Awaitable[bool]]
OnMessage = Callable[[Any], None | Awaitable[None]]


def accept_all(_: p.EditProposed) -> Decision:
    return Decision("accepted")


def refuse_commands(_: p.CommandApprovalRequest) -> bool:
    return False


async def _maybe(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class ProtocolError(Exception):
    """The server answered with an `error` message where the client expected something else."""

    def __init__(self, error: p.Error) -> None:
        super().__init__(f"{error.code}: {error.message}")
        self.error = error


class ProtocolClient:
    def __init__(self, ws: ClientConnection, welcome: p.Welcome) -> None:
        self.ws, self.welcome = ws, welcome

    @classmethod
    async def connect(
        cls,
        url: str,
        token: str | None,
        *,
        origin: str | None = None,
        token_in_query: bool = False,
        client: str = "apprentice-python",
    ) -> ProtocolClient:
        headers = {}
        if token and token_in_query:
            url = f"{url}{'&' if '?' in url else '?'}token={token}"
        elif token:
            headers["Authorization"] = f"Bearer {token}"
        ws = await connect(
            url, additional_headers=headers, origin=origin, proxy=None,  # type: ignore[arg-type]
            max_size=16 * 1024 * 1024, open_timeout=10,
        )  # fmt: skip
        await ws.send(p.encode(p.Hello(protocol_version=p.PROTOCOL_VERSION, client=client)))
        welcome = p.server_adapter.validate_json(await ws.recv())
        if not isinstance(welcome, p.Welcome):
            await ws.close()
            raise ProtocolError(welcome) if isinstance(welcome, p.Error) else TypeError(welcome)
        return cls(ws, welcome)

    async def send(self, message: p._Message | str) -> None:
        await self.ws.send(message if isinstance(message, str) else p.encode(message))

    async def recv(self) -> Any:
        return p.server_adapter.validate_json(await self.ws.recv())

    async def expect(self, kind: type[Any]) -> Any:
        """The next message, which must be a `kind` (an `error` raises ProtocolError)."""
        message = await self.recv()
        if isinstance(message, kind):
            return message
        if isinstance(message, p.Error):
            raise ProtocolError(message)
        raise TypeError(f"expected {kind.__name__}, got {message!r}")

    async def create_session(
        self, mode: str = "interactive", title: str = "", workspace: str = ""
    ) -> p.SessionInfo:
        await self.send(p.SessionCreate(mode=mode, title=title, workspace=workspace))  # type: ignore[arg-type]
        return await self.expect(p.SessionInfo)

    async def resume(self, session_id: str) -> p.SessionInfo:
        await self.send(p.SessionResume(session_id=session_id))
        return await self.expect(p.SessionInfo)

    async def run_turn(
        self,
        session_id: str,
        text: str,
        *,
        workspace: Any,
        review: Review = accept_all,
        approve: Approve = refuse_commands,
        on_message: OnMessage | None = None,
        context: p.EditorContext | None = None,
    ) -> TurnLog:
        turn_id = uuid.uuid4().hex[:12]
        await self.send(
            p.UserMessage(id=turn_id, session_id=session_id, text=text,
                          context=context or p.EditorContext())
        )  # fmt: skip
        log: list[Any] = []
        while True:
            message = await self.recv()
            log.append(message)
            if on_message is not None:
                await _maybe(on_message(message))
            if isinstance(message, p.ToolRequest):
                reply = await answer_request(workspace, message.method, message.params)
                await self.send(tool_result_message(message.request_id, reply))
            elif isinstance(message, p.EditProposed):
                decision: Decision = await _maybe(review(message))
                await self.send(
                    p.EditOutcome(suggestion_id=message.suggestion_id,
                                  outcome=decision.outcome,  # type: ignore[arg-type]
                                  client_event_id=uuid.uuid4().hex, reason=decision.reason,
                                  accepted_hunks=decision.hunks)
                )  # fmt: skip
            elif isinstance(message, p.CommandApprovalRequest):
                approved = bool(await _maybe(approve(message)))
                await self.send(
                    p.CommandApprovalResponse(request_id=message.request_id, approved=approved)
                )
            elif isinstance(message, p.TurnDone) and message.session_id == session_id:
                return TurnLog(message, log)
            elif isinstance(message, p.Error) and message.id == turn_id:
                raise ProtocolError(message)

    async def close(self) -> None:
        await self.ws.close()


def tool_result_message(request_id: str, reply: dict[str, Any]) -> p.ToolResult:
    if "error" in reply:
        error = reply["error"]
        return p.ToolResult(
            request_id=request_id,
            error=p.ToolError(
                code=str(error.get("code", ""))[:64], message=str(error.get("message"))[:16000]
            ),
        )
    return p.ToolResult(request_id=request_id, result=reply.get("result", {}))
