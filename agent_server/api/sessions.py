"""The session manager: create / resume sessions, own them per connection, run their turns.

A session belongs to the connection that created or resumed it (in memory: `live`); another
connection gets `session_not_owned` / `session_in_use`, and a closed connection releases its
sessions (cancelling a running turn: its tools live in that editor). A session runs at most
one turn at a time, as an asyncio task. The turn itself is the session layer's
(agent_server/session/turns.py: a fresh Agent on the stored trajectory, the task or a
follow-up, recorded by its `RecordingSink`); this file only wires it to the connection
(bridge.py) and answers `turn.done`. `transcript_entries` is what `session.info` replays.
Nothing to run; tests/api/test_ws_session.py drives it over a real server.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from typing import TYPE_CHECKING

from agent_server.agent.config import AgentConfig, RunResult
from agent_server.agent.events import Event
from agent_server.api.bridge import DeltaBuffer, WsReviewer, WsSteps, client_workspace
from agent_server.api.peer import Peer
from agent_server.models.base import ModelBackend, Usage
from agent_server.protocol import messages as p
from agent_server.protocol.errors import ApiError, ErrorCode
from agent_server.session.prompts import FOLLOW_UP
from agent_server.session.recorder import RecordingSink
from agent_server.session.store import SessionRow, Store
from agent_server.session.turns import Turn

if TYPE_CHECKING:
    from agent_server.api.config import ApiConfig

log = logging.getLogger(__name__)


@dataclasses.dataclass
class LiveSession:
    row: SessionRow
    conn: Peer
    events: list[Event]  # the stored trajectory, appended to as the agent emits
    running: Turn | None = None
    turn: asyncio.Task[None] | None = None

    @property
    def busy(self) -> bool:
        return self.turn is not None and not self.turn.done()


class SessionManager:
    def __init__(self, store: Store, backend: ModelBackend, config: ApiConfig) -> None:
        self.store, self.backend, self.config = store, backend, config
        self.live: dict[str, LiveSession] = {}

    # ---- ownership -------------------------------------------------------------------------

    async def create(self, conn: Peer, msg: p.SessionCreate) -> LiveSession:
        row = await self.store.create_session(
            mode=msg.mode, title=msg.title, workspace=msg.workspace, client=conn.client,
            owner=conn.id, user_id=conn.user_id,
        )  # fmt: skip
        live = self.live[row.id] = LiveSession(row, conn, [])
        return live

    async def resume(self, conn: Peer, session_id: str) -> LiveSession:
        current = self.live.get(session_id)
        if current is not None:
            if current.conn is conn:
                return current
            raise ApiError(ErrorCode.SESSION_IN_USE, f"session {session_id} is open elsewhere")
        row = await self.store.get_session(session_id)
        if row is None:
            raise ApiError(ErrorCode.SESSION_NOT_FOUND, f"no session {session_id!r}")
        if row.user_id != conn.user_id:
            raise ApiError(ErrorCode.SESSION_NOT_OWNED, "the session belongs to another user")
        events = await self.store.load_events(session_id)
        if session_id in self.live:  # another connection won the race while we read
            raise ApiError(ErrorCode.SESSION_IN_USE, f"session {session_id} is open elsewhere")
        live = self.live[session_id] = LiveSession(row, conn, events)
        await self.store.set_session(session_id, owner=conn.id, status="active")
        return live

    async def owned(self, conn: Peer, session_id: str) -> LiveSession:
        live = self.live.get(session_id)
        if live is not None and live.conn is conn:
            return live
        if live is not None:
            raise ApiError(ErrorCode.SESSION_NOT_OWNED, "the session is another connection's")
        if await self.store.get_session(session_id) is None:
            raise ApiError(ErrorCode.SESSION_NOT_FOUND, f"no session {session_id!r}")
        raise ApiError(ErrorCode.SESSION_NOT_OWNED, "send session.resume for it on this connection")

    async def release(self, conn: Peer) -> None:
        """The connection closed: stop its turns and give its sessions back."""
        mine = [s for s in self.live.values() if s.conn is conn]
        for live in mine:
            if live.busy and live.turn is not None:
                if live.running is not None:
                    live.running.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await asyncio.wait_for(asyncio.shield(live.turn), timeout=5)
                live.turn.cancel()
            self.live.pop(live.row.id, None)
            with contextlib.suppress(Exception):
                await self.store.set_session(live.row.id, owner=None, status="idle")

    # ---- turns -----------------------------------------------------------------------------

    def start_turn(self, live: LiveSession, msg: p.UserMessage) -> None:
        if live.busy:
            raise ApiError(ErrorCode.TURN_IN_PROGRESS, "wait for turn.done or send cancel")
        live.turn = asyncio.create_task(self._turn(live, msg), name=f"turn-{live.row.id}")

    def cancel(self, live: LiveSession) -> None:
        if not live.busy or live.running is None:
            raise ApiError(ErrorCode.NO_TURN, "the session has no running turn")
        live.running.cancel()

    async def _turn(self, live: LiveSession, msg: p.UserMessage) -> None:
        conn, sid, cfg = live.conn, live.row.id, self.config
        deltas = DeltaBuffer(conn, sid, msg.id)
        steps = WsSteps(conn, sid, deltas, reply_id=msg.id)
        sink = RecordingSink(self.store, sid, live.events, steps)
        try:
            base = dataclasses.replace(cfg.agent or AgentConfig(), mode=live.row.mode)
            turn = live.running = Turn(
                self.backend, client_workspace(conn, sid, cfg.tool_timeout_s, msg.id), base,
                sink, reviewer=WsReviewer(conn, sid, cfg.review_timeout_s, msg.id),
                summarizer=cfg.summarizer, on_text=deltas.add,
            )  # fmt: skip
            result = await turn.run(msg.text, msg.context)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug or a DB failure: the person still gets turn.done
            log.exception("turn of session %s failed", sid)
            result = RunResult("error", f"internal error: {exc}", 0, Usage(0, 0), 0)
        await deltas.flush()
        usage = p.Usage(
            prompt_tokens=result.usage.prompt_tokens,
            completion_tokens=result.usage.completion_tokens,
            model_calls=result.model_calls,
        )
        await conn.send(
            p.TurnDone(id=msg.id, session_id=sid, status=result.status, message=result.message,
                       usage=usage)
        )  # fmt: skip


def transcript_entries(events: list[Event], *, limit: int) -> list[p.TranscriptEntry]:
    """What a resumed client shows: the task, the last summary, and the newest steps after it."""
    if not events:
        return []
    start = next((e for e in events if e.kind == "run_started"), None)
    head: list[p.TranscriptEntry] = []
    if start is not None:
        task = str(start.data["task"])
        head.append(p.TranscriptEntry(seq=start.seq, kind="task", role="user", text=task))
    last_summary = max((i for i, e in enumerate(events) if e.kind == "summary"), default=-1)
    if last_summary >= 0:
        e = events[last_summary]
        head.append(p.TranscriptEntry(seq=e.seq, kind="summary", text=str(e.data["summary"])))
    tail: list[p.TranscriptEntry] = []
    for e in events[last_summary + 1 :]:
        if e.kind == "tool_call":
            text = f"{e.data.get('tool')} {e.data.get('args')}"
            tail.append(p.TranscriptEntry(seq=e.seq, kind="tool_call", role="assistant", text=text))
        elif e.kind == "observation":
            message = e.data.get("message") or {}
            text = str(message.get("content") or "")[:2000]
            role = "user" if text.startswith(FOLLOW_UP) else "tool"
            tail.append(p.TranscriptEntry(seq=e.seq, kind="observation", role=role, text=text))
        elif e.kind == "run_finished":
            text = f"{e.data.get('status')}: {e.data.get('message', '')}"
            tail.append(p.TranscriptEntry(seq=e.seq, kind="status", text=text))
    return head + tail[-limit:] if limit else head
