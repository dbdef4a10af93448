"""The session manager: create / resume sessions, own them per connection, run their turns.

A session belongs to the connection that created or resumed it (in memory: `live`); another
connection gets `session_not_owned` / `session_in_use`, and a closed connection releases its
sessions (cancelling a running turn: its tools live in that editor). A session runs at most
one turn at a time. Every turn builds a fresh `Agent` from the stored trajectory, so a turn
after a reconnect or a server restart runs exactly like one on the first connection:
the first turn is `agent.run(task)`; later ones are `agent.resume(events + follow-up)`,
where the follow-up is the person's new message appended as the next observation.
Nothing to run; tests/api/test_sessions.py drives it over a real server.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from typing import TYPE_CHECKING

from agent_server.agent.events import Event
from agent_server.agent.loop import Agent, AgentConfig, RunResult
from agent_server.agent.summarizer import ModelSummarizer
from agent_server.api.recorder import DbSink, DeltaBuffer, WsReviewer, client_workspace
from agent_server.models.base import ModelBackend, Usage
from agent_server.protocol import messages as p
from agent_server.protocol.errors import ApiError, ErrorCode
from agent_server.session.store import SessionRow, Store

if TYPE_CHECKING:
    from agent_server.api.config import ApiConfig
    from agent_server.api.connection import Connection

log = logging.getLogger(__name__)
FOLLOW_UP = "New message from the user:\n"  # how a later message reaches the agent


@dataclasses.dataclass
class LiveSession:
    row: SessionRow
    conn: Connection
    events: list[Event]  # the stored trajectory, appended to as the agent emits
    agent: Agent | None = None
    turn: asyncio.Task[None] | None = None

    @property
    def busy(self) -> bool:
        return self.turn is not None and not self.turn.done()


class SessionManager:
    def __init__(self, store: Store, backend: ModelBackend, config: ApiConfig) -> None:
        self.store, self.backend, self.config = store, backend, config
        self.live: dict[str, LiveSession] = {}

    # ---- ownership -------------------------------------------------------------------------

    async def create(self, conn: Connection, msg: p.SessionCreate) -> LiveSession:
        row = await self.store.create_session(
            mode=msg.mode, title=msg.title, workspace=msg.workspace, client=conn.client,
            owner=conn.id,
        )  # fmt: skip
        live = self.live[row.id] = LiveSession(row, conn, [])
        return live

    async def resume(self, conn: Connection, session_id: str) -> LiveSession:
        current = self.live.get(session_id)
        if current is not None:
            if current.conn is conn:
                return current
            raise ApiError(ErrorCode.SESSION_IN_USE, f"session {session_id} is open elsewhere")
        row = await self.store.get_session(session_id)
        if row is None:
            raise ApiError(ErrorCode.SESSION_NOT_FOUND, f"no session {session_id!r}")
        events = await self.store.load_events(session_id)
        if session_id in self.live:  # another connection won the race while we read
            raise ApiError(ErrorCode.SESSION_IN_USE, f"session {session_id} is open elsewhere")
        live = self.live[session_id] = LiveSession(row, conn, events)
        await self.store.set_session(session_id, owner=conn.id, status="active")
        return live

    async def owned(self, conn: Connection, session_id: str) -> LiveSession:
        live = self.live.get(session_id)
        if live is not None and live.conn is conn:
            return live
        if live is not None:
            raise ApiError(ErrorCode.SESSION_NOT_OWNED, "the session is another connection's")
        if await self.store.get_session(session_id) is None:
            raise ApiError(ErrorCode.SESSION_NOT_FOUND, f"no session {session_id!r}")
        raise ApiError(ErrorCode.SESSION_NOT_OWNED, "send session.resume for it on this connection")

    async def release(self, conn: Connection) -> None:
        """The connection closed: stop its turns and give its sessions back."""
        mine = [s for s in self.live.values() if s.conn is conn]
        for live in mine:
            if live.busy and live.turn is not None:
                if live.agent is not None:
                    live.agent.cancel()
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
        if not live.busy or live.agent is None:
            raise ApiError(ErrorCode.NO_TURN, "the session has no running turn")
        live.agent.cancel()

    async def _turn(self, live: LiveSession, msg: p.UserMessage) -> None:
        conn, sid = live.conn, live.row.id
        deltas = DeltaBuffer(conn, sid, msg.id)
        sink = DbSink(self.store, live, deltas, reply_id=msg.id)
        try:
            agent = live.agent = self._agent(live, sink, deltas, msg.id)
            sink.prompt = lambda: agent.view.messages()
            sink.sampling = agent.config.sampling
            if not live.events:
                result = await agent.run(task_text(msg.text, msg.context))
            else:
                for event in follow_up(live.events, msg.text, msg.context):
                    await sink.emit(event)
                result = await agent.resume(list(live.events))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug or a DB failure: the person still gets turn.done
            log.exception("turn of session %s failed", sid)
            result = RunResult("error", f"internal error: {exc}", 0, Usage(0, 0), 0)  # type: ignore[arg-type]
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

    def _agent(
        self, live: LiveSession, sink: DbSink, deltas: DeltaBuffer, reply_id: str | None
    ) -> Agent:
        summarizer = None
        if self.config.summarizer is not None:
            summarizer = ModelSummarizer(self.backend, self.config.summarizer)
        conn, sid = live.conn, live.row.id
        return Agent(
            self.backend,
            client_workspace(conn, sid, self.config.tool_timeout_s, reply_id),
            self.agent_config(live.row.mode),
            sink=sink,
            reviewer=WsReviewer(conn, sid, self.config.review_timeout_s, reply_id),
            summarizer=summarizer,
            on_text=deltas.add,
        )

    def agent_config(self, mode: str) -> AgentConfig:
        """The configured AgentConfig in the session's mode, with max_tokens that fit."""
        base = self.config.agent or AgentConfig()
        config = dataclasses.replace(base, mode=mode)
        window = self.backend.context_window
        room = window - int(config.context_budget_ratio * window)
        if config.sampling.max_tokens > room:
            sampling = dataclasses.replace(config.sampling, max_tokens=max(1, room))
            config = dataclasses.replace(config, sampling=sampling)
        return config


def task_text(text: str, context: p.EditorContext) -> str:
    """The person's message plus what their editor shows, as the agent's task."""
    parts = [text]
    if context.path:
        lang = f" ({context.language})" if context.language else ""
        parts.append(f"Open file: {context.path}{lang}")
    if context.selection and context.selection.text:
        s = context.selection
        parts.append(f"Selected (lines {s.start.line + 1}-{s.end.line + 1}):\n```\n{s.text}\n```")
    if context.diagnostics:
        lines = [
            f"- {d.path or context.path or '?'}:{d.line + 1} {d.severity}: {d.message}"
            for d in context.diagnostics[:50]
        ]
        parts.append("Diagnostics:\n" + "\n".join(lines))
    return "\n\n".join(parts)


def follow_up(events: list[Event], text: str, context: p.EditorContext) -> list[Event]:
    """Events that hand a later message to the agent: it arrives as the next observation.

    `rebuild_view` pairs an observation with the assistant reply before it; when the last
    run ended without one pending (a limit, a cancel), a short assistant note stands in.
    """
    seq = max((e.seq for e in events), default=0)
    step = max((e.step for e in events), default=0)
    pending = False
    last_finish: Event | None = None
    for e in events:
        if e.kind == "assistant":
            pending = True
        elif e.kind == "observation":
            pending = False
        elif e.kind == "run_finished":
            last_finish = e
    out: list[Event] = []
    if not pending:
        status = last_finish.data.get("status", "stopped") if last_finish else "stopped"
        note = last_finish.data.get("message", "") if last_finish else ""
        seq += 1
        content = f"(the previous request ended: {status}. {note})"
        message = {"role": "assistant", "content": content}
        out.append(Event("assistant", step, {"message": message, "completion": None}, seq))
    seq += 1
    content = FOLLOW_UP + task_text(text, context)
    observation = {"message": {"role": "user", "content": content}, "files": {}, "error": False}
    out.append(Event("observation", step, observation, seq))
    return out


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
