"""Inline completion through the session layer on real databases: a plain-text call (never a
chat), stored (prompt, token ids, sampling, latency) before it is returned, whole even when
the caller is cancelled during the write, nothing stored when the backend fails; a fenced
reply is shown without its fence (a fence alone: nothing), and a model with a
fill-in-the-middle format gets its format and its stop tokens.
Run: .venv/bin/python -m pytest tests/session/test_completion.py -q
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from agent_server.agent.scripted import ScriptedModel
from agent_server.models.base import ModelError
from agent_server.models.fim import Infill
from agent_server.session.completion import InlineRequest, complete_inline
from agent_server.session.prompts import BLOCK_STOPS, LINE_STOPS, RAW_ROLE, fit_inline_prompt
from agent_server.session.store import Store
from feedback.models import Suggestion

REQUEST = InlineRequest("a.py", "python", "def f():\n    return ", "\n", max_tokens=16)


async def test_the_suggestion_is_stored_before_it_is_returned(db: sessionmaker[Session]) -> None:
    model = ScriptedModel(["1 + 1"])
    made = await complete_inline(model, Store(db), REQUEST, temperature=0.2)
    assert (made.text, made.adapter) == ("1 + 1", None)
    with db() as s:
        row = s.get(Suggestion, made.suggestion_id)
        assert row is not None and (row.kind, row.file_path, row.proposed) == (
            "completion", "a.py", "1 + 1",
        )  # fmt: skip
        prompt = fit_inline_prompt(model, "a.py", "python", REQUEST.prefix, REQUEST.suffix, 16)
        # Plain text: the prefix under a file header, its last space left to the model.
        assert prompt.text == "# a.py\ndef f():\n    return" and not prompt.infill
        assert row.prompt_messages == prompt.messages()
        assert model.calls[0].messages == [{"role": RAW_ROLE, "content": prompt.text}]
        assert row.prompt_token_ids == model.prompt_ids(model.calls[0].messages)
        assert len(row.completion_token_ids) == len(row.completion_logprobs) == 5
        assert row.sampling["max_tokens"] == 16 and row.sampling["temperature"] == 0.2
        assert tuple(row.sampling["stop"]) == BLOCK_STOPS  # nothing after the cursor
        assert row.latency_s is not None and row.session_id is None


@pytest.mark.parametrize(
    ("reply", "shown"),
    [("```python\n```", ""), ("```python\nx + 1\n```\nThat adds one.", "x + 1"),
     ("  ", ""), (" x + 1\n", "x + 1")],
)  # fmt: skip
async def test_what_is_shown_is_code_never_a_fence(
    db: sessionmaker[Session], reply: str, shown: str
) -> None:
    request = dataclasses.replace(REQUEST, max_tokens=64)
    made = await complete_inline(ScriptedModel([reply]), Store(db), request, temperature=0.2)
    assert made.text == shown
    with db() as s:
        row = s.get(Suggestion, made.suggestion_id)
        assert row is not None and (row.proposed, row.completion_text) == (shown, reply)


class InfillModel(ScriptedModel):
    INFILL = Infill("starcoder", "<fim_prefix>", "<fim_suffix>", "<fim_middle>", (7, 9))

    def infill(self) -> Infill:
        return self.INFILL


async def test_a_model_with_a_fill_in_the_middle_format_gets_it(
    db: sessionmaker[Session],
) -> None:
    model = InfillModel(["a + b"])
    request = InlineRequest("m.py", "python", "x = add(", ")\nprint(x)\n", max_tokens=8)
    made = await complete_inline(model, Store(db), request, temperature=0.0)
    assert made.text == "a + b"
    text = model.calls[0].messages[0]["content"]
    assert text == "<fim_prefix># m.py\nx = add(<fim_suffix>)\nprint(x)\n<fim_middle>"
    assert model.calls[0].sampling.stop_token_ids == (7, 9)
    assert model.calls[0].sampling.stop == LINE_STOPS  # the cursor's line goes on after it
    with db() as s:
        row = s.get(Suggestion, made.suggestion_id)
        assert row is not None and row.prompt_messages[0]["format"] == "fim"


class SlowStore(Store):
    """A store whose suggestion write takes a while: time for the caller to be cancelled."""

    async def record_suggestion(self, **fields: Any) -> None:
        await asyncio.sleep(0.3)
        await super().record_suggestion(**fields)


async def test_a_cancel_during_the_write_leaves_the_row_whole(db: sessionmaker[Session]) -> None:
    task = asyncio.create_task(complete_inline(ScriptedModel(["x"]), SlowStore(db), REQUEST,
                                               temperature=0.0))  # fmt: skip
    await asyncio.sleep(0.1)  # the model answered; the row is being written
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.6)
    with db() as s:
        [row] = s.scalars(select(Suggestion)).all()
        assert row.completion_text == "x" and row.prompt_token_ids


async def test_a_backend_failure_is_a_model_error_and_stores_nothing(
    db: sessionmaker[Session],
) -> None:
    with pytest.raises(ModelError, match="script_exhausted|no scripted output"):
        await complete_inline(ScriptedModel([]), Store(db), REQUEST, temperature=0.2)
    with db() as s:
        assert s.scalars(select(Suggestion)).all() == []


async def test_a_suggestion_in_a_session_belongs_to_the_sessions_user(
    db: sessionmaker[Session],
) -> None:
    """An agent's edit is stored with its session only (the sink knows no user): the row
    takes the session's user, so a person's edits are theirs as their completions are."""
    from feedback.queries.users import add_user

    with db.begin() as s:
        ada, _ = add_user(s, "ada")
        ada_id = ada.id
    store = Store(db)
    session = await store.create_session(
        mode="interactive", title="t", workspace="", client="test", owner="c1", user_id=ada_id
    )
    assert session.user_id == ada_id
    model = ScriptedModel(["x", "y"])
    inherited = await complete_inline(
        model, store, dataclasses.replace(REQUEST, session_id=session.id), temperature=0.2
    )
    alone = await complete_inline(model, store, REQUEST, temperature=0.2)
    with db() as s:
        assert s.get(Suggestion, inherited.suggestion_id).user_id == ada_id
        assert s.get(Suggestion, alone.suggestion_id).user_id is None
