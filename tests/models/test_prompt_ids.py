"""Prompt token ids on every path: both backends, streamed or not, with tools or a schema.

Each `Completion` names the exact ids the backend fed the model. On vLLM those are what the
server reports (and what its /tokenize says for the same chat); the embedded backend's are
chat_encoding.encode_chat's. A stream collected by `collect_stream` carries the same ids as
the completion that was not streamed. The learner trains on these ids (learner/data.py), so
they must be exact, not re-rendered guesses.

Run one backend: .venv/bin/python -m pytest tests/models/test_prompt_ids.py -k embedded -q
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from agent_server.agent.actions import action_schema, tool_specs
from agent_server.models.base import ModelBackend, Sampling, collect_stream
from agent_server.models.chat_encoding import encode_chat, load_tokenizer
from agent_server.models.embedded import EmbeddedBackend, EmbeddedConfig
from agent_server.models.openai_http import OpenAIBackend, OpenAIConfig

session_loop = pytest.mark.asyncio(loop_scope="session")
KINDS = [pytest.param("vllm", marks=pytest.mark.vllm, id="vllm"), pytest.param("embedded")]
MESSAGES = [
    {"role": "system", "content": "You are a careful Python programmer."},
    {"role": "user", "content": "In a.py, rename x to y."},
    {"role": "assistant", "content": '{"tool": "read_file", "args": {"path": "a.py"}}'},
    {"role": "user", "content": "x = 1\nprint(x)\n"},
]
GREEDY = Sampling(max_tokens=16, temperature=0, seed=0)


@pytest_asyncio.fixture(scope="module", params=KINDS, loop_scope="session")
async def backend(
    request: pytest.FixtureRequest, dev_model_dir: Path
) -> AsyncIterator[ModelBackend]:
    if request.param == "vllm":
        server = request.getfixturevalue("vllm_server")
        config = OpenAIConfig(base_url=server.base_url, model=server.model)
        made: ModelBackend = OpenAIBackend(config)
    else:
        made = EmbeddedBackend(EmbeddedConfig(model_dir=dev_model_dir))
    yield made
    await made.aclose()


@pytest.fixture(scope="module")
def tokenizer(dev_model_dir: Path) -> Any:
    return load_tokenizer(dev_model_dir)


async def served_ids(backend: ModelBackend, tools: list[dict[str, Any]] | None) -> list[int]:
    """The ids the backend itself says it feeds for MESSAGES: vLLM's /tokenize, else the
    embedded backend's own encoding (the one it generates from)."""
    if isinstance(backend, OpenAIBackend):
        body: dict[str, Any] = {"model": backend.model_name, "messages": MESSAGES,
                                "add_generation_prompt": True}  # fmt: skip
        if tools:
            body["tools"] = tools
        async with httpx.AsyncClient() as client:
            reply = await client.post(f"{backend.config.root_url}/tokenize", json=body)
        reply.raise_for_status()
        return list(reply.json()["tokens"])
    assert isinstance(backend, EmbeddedBackend)
    return backend._prompt_ids(MESSAGES, tools)


@session_loop
async def test_completions_streamed_or_not_carry_the_exact_prompt_ids(
    backend: ModelBackend, tokenizer: Any
) -> None:
    expected = await served_ids(backend, None)
    assert expected == encode_chat(tokenizer, MESSAGES), "one encoding: the server's template"
    whole = await backend.complete(MESSAGES, sampling=GREEDY)
    streamed = await collect_stream(backend.stream(MESSAGES, sampling=GREEDY), "m")
    assert whole.prompt_token_ids == streamed.prompt_token_ids == expected
    assert whole.usage.prompt_tokens == streamed.usage.prompt_tokens == len(expected)
    assert streamed.token_ids == whole.token_ids and len(streamed.logprobs) == len(whole.logprobs)
    chunks = [c async for c in backend.stream(MESSAGES, sampling=GREEDY)]
    assert chunks[-1].prompt_token_ids == expected, "the finishing chunk carries them"


@session_loop
async def test_prompt_ids_with_a_schema_or_tools(backend: ModelBackend, tokenizer: Any) -> None:
    schema = action_schema()
    sampling = Sampling(max_tokens=48, temperature=0.7, seed=3)
    whole = await backend.complete(MESSAGES, schema=schema, sampling=sampling)
    streamed = await collect_stream(backend.stream(MESSAGES, schema=schema, sampling=sampling), "m")
    assert whole.prompt_token_ids == streamed.prompt_token_ids == await served_ids(backend, None)
    tools = tool_specs()
    called = await backend.complete(MESSAGES, tools=tools, sampling=GREEDY)
    expected = await served_ids(backend, tools)
    assert called.prompt_token_ids == expected == encode_chat(tokenizer, MESSAGES, tools=tools)
    assert len(expected) > len(whole.prompt_token_ids or []), "the tools are in the prompt"
