"""One agent turn of a stored session, the same for every caller.

    config = fit_config(base, backend, mode="interactive")     # max_tokens fit the window
    turn = Turn(backend, workspace, config, sink, reviewer=person)
    result = await turn.run(text, context)                     # turn.cancel() stops it

Every turn builds a fresh `Agent` from the stored trajectory (`sink.events`), so a turn after
a reconnect or a restart runs exactly like one on the first connection: a session's first
turn is `agent.run(task)`; a later one appends the person's new message as the next
observation (`prompts.follow_up`, stored through the sink) and `agent.resume`s the events.
Nothing to run; tests/session/ and the API and LSP tests drive it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable

from agent_server.agent.config import AgentConfig, RunResult
from agent_server.agent.loop import Agent
from agent_server.agent.summarizer import ModelSummarizer, SummarizerConfig
from agent_server.agent.tools import Reviewer
from agent_server.agent.workspace import Workspace
from agent_server.models.base import ModelBackend
from agent_server.protocol.messages import EditorContext
from agent_server.session.prompts import follow_up, task_text
from agent_server.session.recorder import RecordingSink


def fit_config(
    config: AgentConfig, backend: ModelBackend, *, mode: str | None = None
) -> AgentConfig:
    """`config` (in `mode` when given), its max_tokens lowered to what fits beside the context
    budget of `backend`'s window: a small model takes shorter steps in the same loop."""
    if mode is not None:
        config = dataclasses.replace(config, mode=mode)  # type: ignore[arg-type]
    room = config.room(backend.context_window)
    if config.sampling.max_tokens > room:
        sampling = dataclasses.replace(config.sampling, max_tokens=max(1, room))
        config = dataclasses.replace(config, sampling=sampling)
    return config


class Turn:
    def __init__(
        self,
        backend: ModelBackend,
        workspace: Workspace,
        config: AgentConfig,
        sink: RecordingSink,
        *,
        reviewer: Reviewer | None = None,
        summarizer: SummarizerConfig | None = None,
        on_text: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self.sink = sink
        self.agent = Agent(
            backend, workspace, fit_config(config, backend), sink=sink, reviewer=reviewer,
            summarizer=ModelSummarizer(backend, summarizer) if summarizer is not None else None,
            on_text=on_text,
        )  # fmt: skip

    def cancel(self) -> None:
        """Stop the turn promptly; it ends with status "cancelled"."""
        self.agent.cancel()

    async def run(self, text: str, context: EditorContext | None = None) -> RunResult:
        """The task (a first turn) or a follow-up message (a later one), with what the
        person's editor shows."""
        context = context or EditorContext()
        events = self.sink.events
        if not events:
            return await self.agent.run(task_text(text, context))
        for event in follow_up(events, text, context):
            await self.sink.emit(event)
        return await self.agent.resume(list(events))
