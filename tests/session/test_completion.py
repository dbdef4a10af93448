"""Inline completion through the session layer on real databases: stored (prompt, token
ids, sampling, latency) before it is returned, whole even when the caller is cancelled
during the write, and nothing stored when the backend fails.
Run: .venv/bin/python -m pytest tests/session/test_completion.py -q
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from agent_server.agent.scripted import ScriptedModel
from agent_server.models.base import ModelError
from agent_server.session.completion import InlineRequest, complete_inline
from agent_server.session.prompts import fit_prompt
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
        prompt = fit_prompt(model, "a.py", "python", REQUEST.prefix, REQUEST.suffix, 16)
        assert row.prompt_messages == prompt == model.calls[0].messages
        assert row.prompt_token_ids == model.prompt_ids(prompt)
        assert len(row.completion_token_ids) == len(row.completion_logprobs) == 5
        assert row.sampling["max_tokens"] == 16 and row.sampling["temperature"] == 0.2
        assert row.latency_s is not None and row.session_id is None


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
