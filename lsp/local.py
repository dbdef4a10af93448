"""`LocalHost`: the agent in the language server's own process (the default mode).

    host = LocalHost(config, root="/path/to/project", backend_factory=lambda: build_backend(s))
    await host.start()     # migrates the feedback DB when behind, loads the model

Everything but the editor's side is the session layer's (agent_server/session/), the same
the agent server runs: inline completions are `complete_inline` (stored as a `suggestions`
row before the editor sees them); an agent turn is a `Turn` on the editor's workspace
(lsp/overlay.py), recorded by a `RecordingSink` whose listener reports each tool call as a
progress line, and a later message of a chat continues the session's stored events.
Nothing to run; tests/lsp/test_server.py drives it through the real server process.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from typing import Any

from agent_server.agent.events import Event
from agent_server.models.base import ModelBackend
from agent_server.session.completion import complete_inline
from agent_server.session.recorder import RecordingSink
from agent_server.session.store import Store
from agent_server.session.turns import Turn
from feedback.queries.suggestions import UnknownSuggestion
from feedback.vocab import adapter_version
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

log = logging.getLogger(__name__)
BackendFactory = Callable[[], ModelBackend]


class EditorSteps:
    """The EventListener of an LSP turn: each tool call becomes a progress line."""

    def __init__(self, editor: Editor) -> None:
        self.editor = editor

    async def on_event(self, event: Event) -> None:
        if event.kind == "tool_call":
            await self.editor.on_step(step_line(event.data["tool"], event.data.get("args") or {}))


class LocalHost:
    def __init__(self, config: LspConfig, root: str, backend_factory: BackendFactory) -> None:
        self.config, self.root, self._factory = config, root, backend_factory
        self.backend: ModelBackend | None = None
        self.store: Store | None = None
        self._engine: Any = None
        self._lock = asyncio.Lock()
        self._sessions: dict[str, list[Event]] = {}  # chat sessions of this connection
        self._owner = f"lsp-{os.getpid()}"

    async def start(self) -> None:
        async with self._lock:
            if self.backend is not None:
                return
            await asyncio.to_thread(self._open_database)
            self.backend = await asyncio.to_thread(self._factory)
            log.info("model %s loaded; workspace %s", self.backend.model_name, self.root)

    def _open_database(self) -> None:
        from feedback.db import make_engine, make_sessionmaker
        from feedback.migrate import current_revision, head_revision, upgrade

        url = self.config.database_url
        if self.config.migrate and current_revision(url) != head_revision():
            log.info("migrating the feedback database to head")
            upgrade(url)
        self._engine = make_engine(url)
        self.store = Store(make_sessionmaker(self._engine))

    def _ready(self) -> tuple[ModelBackend, Store]:
        assert self.backend is not None and self.store is not None, "start() first"
        return self.backend, self.store

    async def complete_inline(self, request: InlineRequest) -> InlineSuggestion:
        await self.start()
        backend, store = self._ready()
        temperature = self.config.completion_temperature
        return await complete_inline(backend, store, request, temperature=temperature)

    async def run_turn(
        self, task: str, editor: Editor, *, session_id: str | None, title: str
    ) -> TurnResult:
        await self.start()
        backend, store = self._ready()
        events = self._sessions.get(session_id) if session_id else None
        if events is None:
            row = await store.create_session(
                mode="interactive", title=title[:200], workspace=self.root,
                client=self.config.client_name, owner=self._owner,
            )  # fmt: skip
            session_id, events = row.id, []
            self._sessions[session_id] = events
        assert session_id is not None
        sink = RecordingSink(store, session_id, events, EditorSteps(editor))
        turn = Turn(backend, editor.workspace, self.config.agent, sink, reviewer=editor)
        result = await turn.run(task)  # `task` is already the task text (features/)
        return TurnResult(result.status, result.message, session_id, result.steps)

    async def record_outcome(self, outcome: OutcomeRecord) -> None:
        await self.start()
        _, store = self._ready()
        try:
            await store.record_outcome(
                suggestion_id=outcome.suggestion_id, kind=outcome.kind,
                client_event_id=outcome.event_id, accepted_length=outcome.accepted_length,
                accepted_part=outcome.accepted_part, reason=outcome.reason,
                final_text=outcome.final_text,
            )  # fmt: skip
        except UnknownSuggestion:
            raise UnknownSuggestionError(outcome.suggestion_id) from None

    async def status(self) -> dict[str, Any]:
        await self.start()
        backend, _ = self._ready()
        from sqlalchemy.engine import make_url

        return {
            "mode": "local",
            "server": "in-process",
            "model": backend.model_name,
            "adapter": backend.adapter,
            "adapterVersion": adapter_version(backend.adapter),
            "database": make_url(self.config.database_url).render_as_string(hide_password=True),
            "workspace": self.root,
        }

    async def aclose(self) -> None:
        if self.backend is not None:
            await self.backend.aclose()
        if self._engine is not None:
            self._engine.dispose()
