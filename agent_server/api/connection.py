"""One WebSocket connection: read frames, dispatch by message type, answer.

`Connection.serve` reads frames until the client leaves; each is parsed (frames.py) and
handed to the handler for its type (`HANDLERS`, at the bottom). Handlers are quick: a turn
or an inline completion runs as its own task, so the connection keeps reading (tool
results, outcomes, cancel) while the agent works. Server-initiated requests (tool.request,
edit.proposed, command.approval.request) wait on futures that the matching client message
resolves (`request` / `resolve`). Any `ApiError` becomes an `error` message echoing the
request's `id`, and so does any other exception (code `internal`, logged once with the id),
on the read loop and in the tasks it spawns alike: every request gets an answer, and the
connection stays open. Nothing to run; tests/api/ use a real server.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import itertools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from starlette.websockets import WebSocket

from agent_server.api.auth import SHARED, Principal
from agent_server.api.frames import FrameError, parse_frame
from agent_server.api.metrics import adapter_label
from agent_server.api.sessions import LiveSession, transcript_entries
from agent_server.models.base import BackendUnavailable, ModelError
from agent_server.protocol import messages as p
from agent_server.protocol.errors import ApiError, ErrorCode
from agent_server.session.completion import InlineRequest, complete_inline
from agent_server.session.store import SuggestionInfo
from feedback.queries.suggestions import OutcomeConflict, UnknownSuggestion
from feedback.vocab import DECISION_KINDS

if TYPE_CHECKING:
    from agent_server.api.services import Services

log = logging.getLogger(__name__)


class ConnectionClosed(Exception):
    """The client went away while the server waited for its answer."""


class Connection:
    def __init__(self, ws: WebSocket, services: Services, principal: Principal = SHARED) -> None:
        self.id = f"conn-{uuid.uuid4().hex[:16]}"
        self.ws, self.services = ws, services
        self.principal = principal
        self.client = ""
        self.greeted = self.closed = False
        self._send_lock = asyncio.Lock()
        self._pending: dict[str, tuple[str, asyncio.Future[Any]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._ids = itertools.count(1)

    @property
    def user_id(self) -> int | None:
        """Whose connection: what its sessions, suggestions and outcomes record."""
        return self.principal.user_id

    # ---- plumbing --------------------------------------------------------------------------

    async def send(self, message: p._Message) -> None:
        if self.closed:
            return  # a turn finishing after the client left: nobody to tell
        async with self._send_lock:
            try:
                await self.ws.send_text(p.encode(message))
            except Exception:  # the socket died between the check and the send
                self.closed = True
                return
        self.services.metrics.sent(message)

    def new_request_id(self) -> str:
        return f"req-{next(self._ids)}"

    async def request(
        self, key: str, message: p._Message, timeout_s: float | None, *, kind: str
    ) -> Any:
        """Send `message`, then wait for the client message that `resolve`s `key`."""
        if self.closed:
            raise ConnectionClosed("the editor disconnected")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[key] = (kind, future)
        try:
            await self.send(message)
            return await asyncio.wait_for(future, timeout_s)
        finally:
            self._pending.pop(key, None)

    def resolve(self, key: str, kind: str, value: Any) -> bool:
        entry = self._pending.get(key)
        if entry is None or entry[0] != kind or entry[1].done():
            return False
        entry[1].set_result(value)
        return True

    def spawn(self, work: Awaitable[None], *, request_id: str | None = None) -> None:
        """Run `work` beside the read loop. Whatever it raises is answered: the client gets a
        typed `error` echoing `request_id` (never a request left waiting forever, nor a "Task
        exception was never retrieved"), logged once with that id."""

        async def guarded() -> None:
            try:
                await work
            except asyncio.CancelledError:
                raise
            except ApiError as exc:
                await self.send(p.Error(id=request_id, code=exc.code, message=exc.message))
            except Exception:
                log.exception("connection %s: request %s failed", self.id, request_id)
                await self.send(
                    p.Error(id=request_id, code=ErrorCode.INTERNAL,
                            message=ErrorCode.INTERNAL.meaning)
                )  # fmt: skip

        task = asyncio.ensure_future(guarded())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def serve(self) -> None:
        try:
            while True:
                frame = await self.ws.receive()
                if frame["type"] == "websocket.disconnect":
                    return
                await self.handle_frame(frame.get("text"), frame.get("bytes"))
        finally:
            await self.close()

    async def handle_frame(self, text: str | None, data: bytes | None) -> None:
        frame_id: str | None = None
        session_id: str | None = None
        kind, started = "invalid", time.perf_counter()
        # Every frame counts against the token's rate, well-formed or not; a refused one is
        # still parsed (bounded by max_frame_bytes) so that its error can echo its id.
        allowed = self.services.limits.allow(self.principal.key)
        try:
            msg = parse_frame(text, data, max_bytes=self.services.config.max_frame_bytes)
            frame_id, session_id, kind = msg.id, getattr(msg, "session_id", None), msg.type
            if not allowed:
                raise ApiError(
                    ErrorCode.RATE_LIMITED,
                    f"more than {self.services.config.messages_per_s:g} "
                    "messages/s on this token: this one was not handled; resend it later",
                )
            if not self.greeted and not isinstance(msg, p.Hello | p.Ping):
                raise ApiError(ErrorCode.HELLO_REQUIRED, "send hello first")
            await HANDLERS[type(msg)](self, msg)
        except FrameError as exc:
            await self.send(p.Error(id=exc.frame_id, code=exc.code, message=exc.message))
        except ApiError as exc:
            await self.send(
                p.Error(id=frame_id, code=exc.code, message=exc.message, session_id=session_id)
            )
        except Exception:
            log.exception("connection %s: %s %s failed", self.id, kind, frame_id)
            await self.send(
                p.Error(id=frame_id, code=ErrorCode.INTERNAL, message=ErrorCode.INTERNAL.meaning)
            )
        finally:
            self.services.metrics.observe_message(kind, time.perf_counter() - started)

    async def close(self) -> None:
        self.closed = True
        for task in list(self._tasks):
            task.cancel()
        # Turns are cancelled first (their waits on this editor end as "cancelled"), then
        # whatever still waits on the editor learns that it is gone.
        await self.services.sessions.release(self)
        for _, future in list(self._pending.values()):
            if not future.done():
                future.set_exception(ConnectionClosed("the editor disconnected"))
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


# ---- handlers, one per client message type -------------------------------------------------


async def on_hello(conn: Connection, msg: p.Hello) -> None:
    if msg.protocol_version != p.PROTOCOL_VERSION:
        raise ApiError(
            ErrorCode.UNSUPPORTED_VERSION,
            f"this server speaks protocol {p.PROTOCOL_VERSION}, the client {msg.protocol_version}",
        )
    conn.greeted, conn.client = True, msg.client
    backend, config = conn.services.backend, conn.services.config
    await conn.send(
        p.Welcome(id=msg.id, server=config.server_name, model=backend.model_name,
                  adapter=backend.adapter, max_frame_bytes=config.max_frame_bytes)
    )  # fmt: skip


def _session_info(
    live: LiveSession, msg_id: str | None, *, resumed: bool, transcript: int
) -> p.SessionInfo:
    row = live.row
    entries = transcript_entries(live.events, limit=transcript) if resumed else []
    return p.SessionInfo(
        id=msg_id, session_id=row.id, mode=row.mode, title=row.title, status="active",
        created_at=row.created_at, resumed=resumed,
        last_seq=max((e.seq for e in live.events), default=0), transcript=entries,
    )  # fmt: skip


async def on_session_create(conn: Connection, msg: p.SessionCreate) -> None:
    live = await conn.services.sessions.create(conn, msg)
    await conn.send(_session_info(live, msg.id, resumed=False, transcript=0))


async def on_session_resume(conn: Connection, msg: p.SessionResume) -> None:
    live = await conn.services.sessions.resume(conn, msg.session_id)
    limit = conn.services.config.transcript_events
    await conn.send(_session_info(live, msg.id, resumed=True, transcript=limit))


async def on_user_message(conn: Connection, msg: p.UserMessage) -> None:
    live = await conn.services.sessions.owned(conn, msg.session_id)
    conn.services.sessions.start_turn(live, msg)


async def on_cancel(conn: Connection, msg: p.Cancel) -> None:
    live = await conn.services.sessions.owned(conn, msg.session_id)
    conn.services.sessions.cancel(live)


async def on_tool_result(conn: Connection, msg: p.ToolResult) -> None:
    if not conn.resolve(msg.request_id, "tool", msg):
        raise ApiError(ErrorCode.UNKNOWN_REQUEST, f"no pending tool request {msg.request_id!r}")


async def on_command_approval(conn: Connection, msg: p.CommandApprovalResponse) -> None:
    if not conn.resolve(msg.request_id, "approval", msg):
        raise ApiError(ErrorCode.UNKNOWN_REQUEST, f"no pending approval {msg.request_id!r}")


async def on_completion_request(conn: Connection, msg: p.CompletionRequest) -> None:
    if msg.session_id is not None:
        await conn.services.sessions.owned(conn, msg.session_id)

    services, temperature = conn.services, conn.services.config.completion_temperature
    request = InlineRequest(msg.path, msg.language, msg.prefix, msg.suffix, msg.max_tokens,
                            session_id=msg.session_id, user_id=conn.user_id)  # fmt: skip

    async def work() -> None:
        try:
            made = await complete_inline(
                services.backend, services.store, request, temperature=temperature
            )
        except BackendUnavailable as exc:
            raise ApiError(ErrorCode.MODEL_UNAVAILABLE, str(exc)) from None
        except ModelError as exc:
            raise ApiError(ErrorCode.MODEL_ERROR, f"{exc.code}: {exc}") from None
        await conn.send(
            p.CompletionSuggestion(id=msg.id, suggestion_id=made.suggestion_id,
                                   text=made.text, adapter=made.adapter)
        )  # fmt: skip

    conn.spawn(work(), request_id=msg.id)


async def on_edit_outcome(conn: Connection, msg: p.EditOutcome) -> None:
    services = conn.services

    def admit(found: SuggestionInfo) -> ApiError | None:
        """Checked in the write's own transaction (a worker thread: reads only)."""
        # Another person's suggestion is answered like a missing one: ids do not leak whose.
        if found.user_id != conn.user_id:
            return ApiError(ErrorCode.SUGGESTION_NOT_FOUND, f"no suggestion {msg.suggestion_id!r}")
        live = services.sessions.live.get(found.session_id) if found.session_id else None
        if live is not None and live.conn is not conn:
            return ApiError(
                ErrorCode.SESSION_NOT_OWNED, "the suggestion's session is open elsewhere"
            )
        return None

    client_time = msg.client_time
    if client_time is not None and client_time.tzinfo is None:
        client_time = client_time.replace(tzinfo=dt.UTC)  # the protocol's times are UTC
    try:
        stored = await services.store.record_outcome(
            suggestion_id=msg.suggestion_id, kind=msg.outcome,
            client_event_id=msg.client_event_id, accepted_part=msg.accepted_hunks,
            accepted_length=msg.accepted_length, reason=msg.reason,
            final_text=msg.final_text, client_time=client_time, user_id=conn.user_id,
            admit=admit,
        )  # fmt: skip
    except OutcomeConflict as exc:
        raise ApiError(ErrorCode.OUTCOME_CONFLICT, str(exc)) from None
    except UnknownSuggestion:
        raise ApiError(ErrorCode.SUGGESTION_NOT_FOUND, msg.suggestion_id) from None
    found = stored.suggestion
    if not stored.duplicate:
        services.metrics.outcomes.labels(
            msg.outcome, found.kind, adapter_label(found.adapter_version)
        ).inc()
    # Acknowledged only now that the row is committed; then the waiting agent may go on.
    await conn.send(
        p.OutcomeAck(id=msg.id, suggestion_id=msg.suggestion_id,
                     client_event_id=msg.client_event_id, outcome_id=str(stored.id),
                     duplicate=stored.duplicate)
    )  # fmt: skip
    if msg.outcome in DECISION_KINDS:  # the outcomes a waiting edit proposal ends on
        conn.resolve(msg.suggestion_id, "decision", msg)


async def on_ping(conn: Connection, msg: p.Ping) -> None:
    await conn.send(p.Pong(id=msg.id))


Handler = Callable[[Connection, Any], Awaitable[None]]
HANDLERS: dict[type, Handler] = {
    p.Hello: on_hello,
    p.SessionCreate: on_session_create,
    p.SessionResume: on_session_resume,
    p.UserMessage: on_user_message,
    p.Cancel: on_cancel,
    p.ToolResult: on_tool_result,
    p.CommandApprovalResponse: on_command_approval,
    p.CompletionRequest: on_completion_request,
    p.EditOutcome: on_edit_outcome,
    p.Ping: on_ping,
}
