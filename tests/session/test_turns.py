"""A session's turns through the session layer on real databases (SQLite and PostgreSQL):
the agent-config clamp, the first turn vs a follow-up, and the RecordingSink's rows (every
event stored and live, an edit's suggestion with the exact prompt, ids and sampling).
Run: .venv/bin/python -m pytest tests/session/test_turns.py -q
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from agent_server.agent.config import AgentConfig
from agent_server.agent.events import EditDecision, EditProposal, Event
from agent_server.agent.scripted import ScriptedModel
from agent_server.agent.workspace import LocalWorkspace
from agent_server.models.base import Sampling
from agent_server.protocol.messages import EditorContext
from agent_server.session.prompts import FOLLOW_UP
from agent_server.session.recorder import RecordingSink
from agent_server.session.store import Store
from agent_server.session.turns import Turn, fit_config
from feedback.models import Suggestion


def act(tool: str, **args: str) -> str:
    return json.dumps({"thought": f"use {tool}", "tool": tool, "args": args})


class Accept:
    async def review_edit(self, proposal: EditProposal) -> EditDecision:
        return EditDecision.accept()

    async def approve_command(self, command: str) -> bool:
        return False


class Heard:
    """An EventListener that keeps what it heard (the sink calls it after storing)."""

    def __init__(self, store: Store, session_id: str) -> None:
        self.store, self.session_id = store, session_id
        self.kinds: list[str] = []
        self.stored_before: list[bool] = []

    async def on_event(self, event: Event) -> None:
        self.kinds.append(event.kind)
        stored = await self.store.load_events(self.session_id)
        self.stored_before.append(stored[-1].seq == event.seq)


def test_fit_config_clamps_max_tokens_to_the_window_and_sets_the_mode() -> None:
    base = AgentConfig(sampling=Sampling(max_tokens=512, temperature=0.3), step_limit=7)
    small = ScriptedModel([], context_window=1000)  # room: 1000 - 800 = 200 tokens
    fitted = fit_config(base, small, mode="autonomous")
    assert fitted.sampling == Sampling(max_tokens=200, temperature=0.3)
    assert (fitted.mode, fitted.step_limit) == ("autonomous", 7)
    roomy = ScriptedModel([], context_window=8192)
    assert fit_config(base, roomy) == base  # fits already: nothing changes
    assert fit_config(base, ScriptedModel([], context_window=64)).sampling.max_tokens == 13


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "a.py").write_text("x = 1\n")
    return tmp_path


async def test_first_turn_then_follow_up_record_every_event_and_the_suggestion(
    db: sessionmaker[Session], root: Path
) -> None:
    store = Store(db)
    row = await store.create_session(mode="interactive", title="t", workspace=str(root),
                                     client="test", owner="me")  # fmt: skip
    edit = act("edit", path="a.py", search="x = 1", replace="x = 2")
    model = ScriptedModel([edit, act("finish", message="ok"), act("finish", message="still ok")])
    events: list[Event] = []
    heard = Heard(store, row.id)
    sink = RecordingSink(store, row.id, events, heard)
    # few_shot=False: the task is messages[1] (the agent's few-shot turns: tests/agent)
    base = AgentConfig(sampling=Sampling(max_tokens=300, seed=1), few_shot=False)
    turn = Turn(model, LocalWorkspace(root), base, sink, reviewer=Accept())
    first = await turn.run("set x to 2", EditorContext(path="a.py"))
    assert (first.status, first.message) == ("finished", "ok")
    assert (root / "a.py").read_text() == "x = 2\n"
    assert model.calls[0].messages[1]["content"].startswith("set x to 2\n\nOpen file: a.py")
    assert await store.load_events(row.id) == events and heard.kinds == [e.kind for e in events]
    assert all(heard.stored_before)  # the listener hears of an event once it is stored

    with db() as s:
        [suggestion] = s.scalars(select(Suggestion)).all()
        assert (suggestion.kind, suggestion.session_id, suggestion.file_path) == (
            "edit", row.id, "a.py",
        )  # fmt: skip
        assert suggestion.prompt_messages == model.calls[0].messages
        assert suggestion.prompt_token_ids == model.prompt_ids(model.calls[0].messages)
        assert suggestion.completion_text == edit
        assert len(suggestion.completion_token_ids) == len(suggestion.completion_logprobs) > 0
        assert suggestion.sampling["max_tokens"] == 300 and suggestion.sampling["seed"] == 1
        assert "+x = 2" in suggestion.proposed

    # A fresh Turn on the same trajectory: the follow-up, not a new task.
    again = Turn(model, LocalWorkspace(root), base, sink, reviewer=Accept())
    second = await again.run("and now?")
    assert second.message == "still ok"
    last = model.calls[-1].messages
    assert last[-1] == {"role": "user", "content": FOLLOW_UP + "and now?"}
    assert last[1]["content"].startswith("set x to 2")  # the first task is still the task
    assert await store.load_events(row.id) == events
    kinds = [e.kind for e in events]
    assert kinds.count("run_started") == 2 and [e.seq for e in events] == list(
        range(1, len(events) + 1)
    )
