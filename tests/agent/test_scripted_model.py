"""ScriptedModel: replays outputs, fakes consistent tokens, answers summary prompts, counts.

Run: .venv/bin/python -m pytest tests/agent/test_scripted_model.py -q
"""

from __future__ import annotations

import pytest

from agent_server.agent import prompts
from agent_server.agent.scripted import ScriptedModel, ScriptExhausted
from agent_server.models.base import (
    Completion,
    ContextWindowExceeded,
    ModelBackend,
    ModelError,
    Sampling,
    ToolCall,
    Usage,
    collect_stream,
)

USER = [{"role": "user", "content": "hello"}]


def test_is_a_model_backend() -> None:
    assert isinstance(ScriptedModel([]), ModelBackend)


async def test_replays_in_order_and_records_calls() -> None:
    model = ScriptedModel(["first", lambda msgs: f"saw {msgs[-1]['content']}"])
    a = await model.complete(USER)
    b = await model.complete(USER, schema={"type": "object"}, sampling=Sampling(max_tokens=50))
    assert (a.text, b.text) == ("first", "saw hello")
    assert [c.kind for c in model.calls] == ["agent", "agent"]
    assert model.calls[1].schema == {"type": "object"}
    assert model.calls[1].sampling.max_tokens == 50
    assert model.calls[0].messages == USER
    with pytest.raises(ScriptExhausted) as err:
        await model.complete(USER)
    assert isinstance(err.value, ModelError)


async def test_tokens_are_consistent() -> None:
    model = ScriptedModel(["abcdefg"], chars_per_token=3)
    c = await model.complete(USER)
    assert len(c.token_ids) == len(c.logprobs) == c.usage.completion_tokens == 3
    assert all(lp < 0 for lp in c.logprobs)
    assert c.usage.prompt_tokens == model.count_tokens(USER) == 4 + 2  # overhead + ceil(5/3)
    # Same text, same ids: a learner could re-score them.
    again = await ScriptedModel(["abcdefg"], chars_per_token=3).complete(USER)
    assert again.token_ids == c.token_ids


async def test_cut_at_max_tokens_like_a_server() -> None:
    c = await ScriptedModel(["x" * 100]).complete(USER, sampling=Sampling(max_tokens=10))
    assert c.finish_reason == "length" and c.text == "x" * 10 and len(c.token_ids) == 10


async def test_context_window_is_enforced() -> None:
    model = ScriptedModel(["never"], context_window=100)
    with pytest.raises(ContextWindowExceeded):
        long = [{"role": "user", "content": "y" * 80}]
        await model.complete(long, sampling=Sampling(max_tokens=20))


async def test_summary_requests_do_not_consume_outputs() -> None:
    model = ScriptedModel(["agent reply"], summary=lambda msgs: "the summary")
    request = prompts.summary_request("task", "plan", "", "[step 1] agent: hi")
    s = await model.complete(request)
    a = await model.complete(USER)
    assert (s.text, a.text) == ("the summary", "agent reply")
    assert [c.kind for c in model.calls] == ["summary", "agent"]


async def test_ready_completions_pass_through() -> None:
    call = ToolCall("c1", "list_dir", '{"path": "."}')
    done = Completion("", [1], [-0.1], "tool_calls", Usage(1, 1), "m", None, tool_calls=[call])
    assert await ScriptedModel([done]).complete(USER) is done


async def test_stream_adds_up_to_complete() -> None:
    text = "streamed reply"
    whole = await ScriptedModel([text], chars_per_token=2).complete(USER)
    pieces: list[str] = []

    async def on_text(t: str) -> None:
        pieces.append(t)

    model = ScriptedModel([text], chars_per_token=2)
    streamed = await collect_stream(model.stream(USER), model.model_name, on_text)
    assert "".join(pieces) == streamed.text == whole.text
    assert streamed.token_ids == whole.token_ids and streamed.logprobs == whole.logprobs
    assert streamed.usage == whole.usage and streamed.finish_reason == "stop"


def test_validates_its_config() -> None:
    with pytest.raises(ValueError, match="context_window"):
        ScriptedModel([], context_window=10)
    with pytest.raises(ValueError, match="chars_per_token"):
        ScriptedModel([], chars_per_token=0)
