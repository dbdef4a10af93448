"""`RecordingSink`: the agent loop's EventSink over the feedback database, for every caller.

    sink = RecordingSink(store, session_id, events, listener=steps)  # listener: optional
    agent = Agent(backend, workspace, config, sink=sink, reviewer=person)

Every trajectory event is stored (`Store.append_event`) and appended to `events`, the live
trajectory a later turn resumes from; then the transport's `EventListener` hears of it (the
WebSocket API sends `agent.step` / `summary.made`, the language server reports a progress
line). The completion behind each edit proposal is stored as a `suggestions` row with the
exact prompt and sampling the loop hands over, before the person sees the proposal.
Nothing to run; tests/session/test_recorder.py drives it on real databases.
"""

from __future__ import annotations

from typing import Protocol

from agent_server.agent.events import EditProposal, Event
from agent_server.models.base import Completion, Message, Sampling
from agent_server.session.store import Store


class EventListener(Protocol):
    """A transport's reaction to a stored event (what the person should see of it)."""

    async def on_event(self, event: Event) -> None: ...


class RecordingSink:
    def __init__(
        self,
        store: Store,
        session_id: str,
        events: list[Event],
        listener: EventListener | None = None,
    ) -> None:
        self.store, self.session_id, self.events = store, session_id, events
        self.listener = listener

    async def emit(self, event: Event) -> None:
        await self.store.append_event(self.session_id, event)
        self.events.append(event)
        if self.listener is not None:
            await self.listener.on_event(event)

    async def record_suggestion(
        self,
        completion: Completion,
        proposal: EditProposal,
        *,
        prompt: list[Message],
        sampling: Sampling,
    ) -> None:
        await self.store.record_suggestion(
            suggestion_id=proposal.id, kind="edit", completion=completion, prompt=prompt,
            proposed=proposal.diff, session_id=self.session_id, file_path=proposal.path,
            sampling=sampling,
        )  # fmt: skip
