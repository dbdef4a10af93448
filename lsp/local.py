"""`LocalHost`: the agent in the language server's own process (the default mode).

    host = LocalHost(config, root="/path/to/project", backend_factory=lambda: build_backend(s))
    await host.start()     # migrates the feedback DB when behind, loads the model

Inline completions are one model call on the same fill-in-the-middle prompt the agent
server uses (agent_server/api/completion.py), stored as a `suggestions` row before the
editor sees them. Agent turns run the one agent loop (agent_server/agent/loop.py) on the
editor's workspace (lsp/overlay.py), record every event and every edit proposal through
the web wing's transport-neutral `Store` (agent_server/session/store.py), and continue a chat
session from its stored events like the agent server does (`follow_up`).
Nothing to run; tests/lsp/test_server.py drives it through the real server process.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import time
import uuid
from collections.abc import Callable
from typing import Any

from agent_server.agent.events import EditProposal, Event
from agent_server.agent.loop import Agent, AgentConfig
from agent_server.api.completion import completion_prompt
from agent_server.api.sessions import follow_up
from agent_server.models.base import Completion, Message, ModelBackend, Sampling
from agent_server.session.store import Store, adapter_version
from feedback.queries.suggestions import UnknownSuggestion
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


class LspSink:
    """The loop's EventSink for one LSP session: events and edit suggestions to the DB."""

    def __init__(self, store: Store, session_id: str, events: list[Event], editor: Editor):
        self.store, self.session_id, self.events, self.editor = store, session_id, events, editor
        self.prompt: Callable[[], list[Message]] = list
        self.sampling: Sampling | None = None

    async def emit(self, event: Event) -> None:
        await self.store.append_event(self.session_id, event)
        self.events.append(event)
        if event.kind == "tool_call":
            await self.editor.on_step(step_line(event.data["tool"], event.data.get("args") or {}))

    async def record_suggestion(self, completion: Completion, proposal: EditProposal) -> None:
        await self.store.record_suggestion(
            suggestion_id=proposal.id, kind="edit", completion=completion, prompt=self.prompt(),
            proposed=proposal.diff, session_id=self.session_id, file_path=proposal.path,
            sampling=self.sampling,
        )  # fmt: skip


def fit_prompt(backend: ModelBackend, request: InlineRequest) -> list[Message]:
    """The completion prompt, prefix/suffix halved (far ends first) until it fits."""
    budget = backend.context_window - request.max_tokens
    prefix, suffix = request.prefix, request.suffix
    while True:
        prompt = completion_prompt(request.path, request.language, prefix, suffix)
        if backend.count_tokens(prompt) <= budget or (not prefix and not suffix):
            return prompt
        if len(prefix) >= len(suffix):
            prefix = prefix[len(prefix) // 2 :] if len(prefix) > 1 else ""
        else:
            suffix = suffix[: len(suffix) // 2] if len(suffix) > 1 else ""


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
        prompt = fit_prompt(backend, request)
        sampling = Sampling(
            max_tokens=request.max_tokens, temperature=self.config.completion_temperature
        )
        started = time.monotonic()
        completion = await backend.complete(prompt, sampling=sampling)
        suggestion_id = str(uuid.uuid4())
        # Stored before the editor sees it; a cancel here must not leave half a record.
        await asyncio.shield(
            store.record_suggestion(
                suggestion_id=suggestion_id, kind="completion", completion=completion,
                prompt=prompt, proposed=completion.text, session_id=None,
                file_path=request.path, sampling=sampling,
                latency_s=time.monotonic() - started,
            )
        )  # fmt: skip
        return InlineSuggestion(suggestion_id, completion.text, completion.adapter)

    def agent_config(self, backend: ModelBackend) -> AgentConfig:
        config = AgentConfig(
            mode="interactive",
            step_limit=self.config.agent_step_limit,
            time_limit_s=self.config.agent_time_limit_s,
            sampling=Sampling(max_tokens=self.config.agent_max_tokens),
        )
        window = backend.context_window
        room = window - int(config.context_budget_ratio * window)
        if config.sampling.max_tokens > room:  # a small model: shorter steps, same loop
            config = dataclasses.replace(config, sampling=Sampling(max_tokens=max(1, room)))
        return config

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
        sink = LspSink(store, session_id, events, editor)
        agent = Agent(backend, editor.workspace, self.agent_config(backend), sink=sink,
                      reviewer=editor)  # fmt: skip
        sink.prompt = lambda: agent.view.messages()
        sink.sampling = agent.config.sampling
        if not events:
            result = await agent.run(task)
        else:  # a follow-up in the same chat: the message arrives as the next observation
            from agent_server.protocol.messages import EditorContext

            for event in follow_up(events, task, EditorContext()):
                await sink.emit(event)
            result = await agent.resume(list(events))
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
