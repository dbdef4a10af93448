"""An agent edit and an inline completion over the WebSocket, on the real vLLM server and on
the embedded backend: each suggestion row holds the exact prompt ids the backend fed the
model, and the learner's dataset built from the rows uses them unchanged.

The dev model would not choose a matching edit by itself, so the session's agent decodes
its actions under a narrowed schema (`AgentConfig.action_schema`): one `edit` of `a.py`
replacing `x = 1` with `x = 2`, only the short `thought` free. The agent streams its steps
(the path that once dropped the prompt ids). Expected ids: vLLM's /tokenize of the stored
prompt (the edit's chat messages; the inline completion's plain text, never a chat) (and
vLLM's own report when the same request is sent again); on the embedded backend
its own encoding (agent_server/models/chat_encoding.py), which is what it generates from.
Run: .venv/bin/python -m pytest tests/api/test_prompt_ids.py -q   (-k embedded: no vLLM)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from agent_server.agent.config import AgentConfig
from agent_server.agent.workspace import LocalWorkspace
from agent_server.api.config import ApiConfig
from agent_server.models.base import Sampling
from agent_server.models.chat_encoding import encode_chat, encode_text, load_tokenizer
from agent_server.models.openai_http import OpenAIBackend, OpenAIConfig
from agent_server.models.vllm_command import SERVED_NAME
from agent_server.protocol import messages as p
from agent_server.protocol.client import Decision, ProtocolClient
from agent_server.session.prompts import RAW_ROLE
from feedback.db import make_engine, make_sessionmaker, transaction
from feedback.models import Suggestion
from learner.config import DataConfig
from learner.data import collect_samples
from tests.api.server import TOKEN

pytestmark = [pytest.mark.postgres]
KINDS = [pytest.param("vllm", marks=[pytest.mark.vllm, pytest.mark.slow]), "embedded"]
EDIT_ONLY = {  # an action parse_action reads: the edit the task asks for, nothing else
    "type": "object",
    "properties": {
        "thought": {"type": "string", "maxLength": 24},
        "tool": {"const": "edit"},
        "args": {
            "type": "object",
            "properties": {
                "path": {"const": "a.py"},
                "search": {"const": "x = 1"},
                "replace": {"const": "x = 2"},
            },
            "required": ["path", "search", "replace"],
            "additionalProperties": False,
        },
    },
    "required": ["thought", "tool", "args"],
    "additionalProperties": False,
}
SAMPLING = Sampling(max_tokens=128, temperature=0.8)


def settings_for(kind: str, base: Any, request: pytest.FixtureRequest, model_dir: Path) -> Any:
    if kind == "embedded":
        return base.model_copy(update={"model_backend": "embedded", "model_name": str(model_dir)})
    server = request.getfixturevalue("vllm_server")
    update = {"model_backend": "openai", "model_url": server.base_url, "model_name": str(model_dir)}
    return base.model_copy(update=update)


async def reported_ids(settings: Any, messages: list[dict[str, Any]], model_dir: Path) -> list[int]:
    """The ids the backend reports for `messages`, asked independently of the session.

    An inline completion's prompt is one plain-text entry (session/prompts.py, RAW_ROLE):
    encoded as /v1/completions encodes it, never through the chat template."""
    raw = messages[0]["content"] if messages[0]["role"] == RAW_ROLE else None
    if settings.model_backend == "embedded":
        tokenizer = load_tokenizer(model_dir)  # the embedded backend's own encoding
        return encode_chat(tokenizer, messages) if raw is None else encode_text(tokenizer, raw)
    root = settings.model_url.removesuffix("/v1")
    body: dict[str, Any] = {"model": SERVED_NAME, "messages": messages,
                            "add_generation_prompt": True}  # fmt: skip
    if raw is not None:
        body = {"model": SERVED_NAME, "prompt": raw}
    async with httpx.AsyncClient() as client:
        reply = await client.post(f"{root}/tokenize", json=body)
    reply.raise_for_status()
    tokenized = list(reply.json()["tokens"])
    http = OpenAIBackend(OpenAIConfig(base_url=settings.model_url, model=SERVED_NAME))
    try:  # the same request again: vLLM reports the ids it fed the model
        if raw is None:
            again = await http.complete(messages, schema=EDIT_ONLY, sampling=SAMPLING)
        else:
            again = await http.complete_text(raw, sampling=SAMPLING)
    finally:
        await http.aclose()
    assert again.prompt_token_ids == tokenized
    return tokenized


@pytest.mark.parametrize("kind", KINDS)
async def test_suggestion_rows_hold_the_exact_prompt_ids_and_the_learner_uses_them(
    kind: str, api_settings: Any, request: pytest.FixtureRequest, dev_model_dir: Path,
    serve: Any, tmp_path: Path,
) -> None:  # fmt: skip
    settings = settings_for(kind, api_settings, request, dev_model_dir)
    agent = AgentConfig(step_limit=2, max_format_errors=2, action_schema=EDIT_ONLY,
                        sampling=SAMPLING)  # fmt: skip
    server = serve(settings, config=ApiConfig(agent=agent))
    root = tmp_path / "project"
    root.mkdir()
    (root / "a.py").write_text("x = 1\nprint(x)\n")
    client = await ProtocolClient.connect(server.ws_url, TOKEN)
    info = await client.create_session()
    proposals: list[p.EditProposed] = []

    def accept(proposal: p.EditProposed) -> Decision:
        proposals.append(proposal)
        return Decision("accepted")

    log = await client.run_turn(info.session_id, "In a.py replace `x = 1` with `x = 2`.",
                                workspace=LocalWorkspace(root), review=accept)  # fmt: skip
    assert log.done.status != "model_error", log.done.message
    assert len(proposals) == 1, [m.tool for m in log.of(p.AgentStep)]
    assert (root / "a.py").read_text() == "x = 2\nprint(x)\n"
    await client.send(
        p.CompletionRequest(
            id="c1",
            session_id=info.session_id,
            path="b.py",
            language="python",
            prefix="def add(a, b):\n    ",
        )
    )
    completion = await client.expect(p.CompletionSuggestion)
    await client.send(p.EditOutcome(suggestion_id=completion.suggestion_id, outcome="rejected",
                                    client_event_id="c1-rejected"))  # fmt: skip
    await client.expect(p.OutcomeAck)
    await client.close()

    engine = make_engine(settings.database_url)
    db = make_sessionmaker(engine)
    tokenizer = load_tokenizer(dev_model_dir)
    with db() as s:
        rows = {r.kind: r for r in s.scalars(select(Suggestion))}
        assert set(rows) == {"edit", "completion"}
        assert rows["edit"].id == proposals[0].suggestion_id
        for row in rows.values():
            expected = await reported_ids(settings, row.prompt_messages, dev_model_dir)
            assert row.prompt_token_ids == expected, row.kind
            assert len(row.completion_token_ids) == len(row.completion_logprobs) > 0
            assert all(lp <= 0 for lp in row.completion_logprobs)
            text = tokenizer.decode(row.completion_token_ids, skip_special_tokens=True)
            # A stop string ends the text before it; its tokens stay in the ids (as in vLLM).
            assert text.startswith(row.completion_text), row.kind
        assert "x = 2" in rows["edit"].completion_text  # the constrained edit action
    with transaction(db) as s:
        samples, _ = collect_samples(s, DataConfig(settle_s=0.0), after_outcome_id=0)
    by_id = {x.suggestion_id: x for x in samples}
    assert set(by_id) == {row.id for row in rows.values()}
    for row in rows.values():  # the dataset is the rows' ids, unchanged
        sample = by_id[row.id]
        assert sample.prompt_ids == row.prompt_token_ids
        assert sample.completion_ids == row.completion_token_ids
        assert sample.behaviour_logprobs == row.completion_logprobs
    assert by_id[rows["edit"].id].desirable and not by_id[rows["completion"].id].desirable
    engine.dispose()
