"""The whole web wing on real parts: a WebSocket session against the real vLLM server (CPU
build) on the dev model, the backend built by the factory from Settings, the feedback in a
real PostgreSQL database.

The context budget is small (half of the dev model's 2048-token window), so the agent must
summarize. The task quotes the exact text to replace, and turns continue (follow-up
messages) until the model has proposed an edit, which the person accepts, bounded in turns.
The dev model is barely trained: its actions always parse (JSON-schema constrained
decoding), but it picks tools and arguments almost at random, so an `edit` whose SEARCH
matches the file is rare (none seen in the runs so far: its edits name files that do not
exist). The session therefore also asks for an inline completion (a suggestion tied to the
session that every model call yields) and rejects it. Afterwards PostgreSQL holds the
session's suggestions with token ids and logprobs, each with its outcome, and a summary
event; when the model did propose an edit, that row and its `accepted` outcome too.
Run: .venv/bin/python -m pytest tests/api/test_integration_vllm.py -q
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from agent_server.agent.loop import AgentConfig
from agent_server.agent.summarizer import SummarizerConfig
from agent_server.agent.workspace import LocalWorkspace
from agent_server.api.config import ApiConfig
from agent_server.models.base import Sampling
from agent_server.protocol import messages as p
from agent_server.protocol.client import Decision, ProtocolClient
from feedback.db import make_engine, make_sessionmaker
from feedback.models import Outcome, SessionEvent, Suggestion
from ground.settings import Settings
from tests.api.server import TOKEN

pytestmark = [pytest.mark.vllm, pytest.mark.postgres, pytest.mark.slow]
MAX_TURNS = 4
TASK = "In a.py replace the text `x = 1` with `x = 2`: edit a.py, search `x = 1`, replace `x = 2`."


async def test_session_on_vllm_records_suggestions_outcomes_and_summaries(
    vllm_server, pg_head_url: str, serve, tmp_path: Path
) -> None:
    settings = Settings(
        home=tmp_path / "home",
        database_url=pg_head_url,
        token=TOKEN,
        model_backend="openai",
        model_url=vllm_server.base_url,
        model_name=str(vllm_server.model_dir),
    )
    config = ApiConfig(
        agent=AgentConfig(
            step_limit=8,
            max_format_errors=8,
            context_budget_ratio=0.5,
            sampling=Sampling(max_tokens=200, temperature=0.8),
        ),
        summarizer=SummarizerConfig(
            budget_ratio=0.5, target_ratio=0.35, max_summary_tokens=96, keep_last_turns=1
        ),
        tool_timeout_s=30,
    )
    server = serve(settings, config=config)  # the backend comes from the factory: vLLM
    root = tmp_path / "project"
    root.mkdir()
    (root / "a.py").write_text("x = 1\nprint(x)\n")
    client = await ProtocolClient.connect(server.ws_url, TOKEN)
    assert client.welcome.model == vllm_server.model
    info = await client.create_session()
    proposals: list[p.EditProposed] = []

    def review(proposal: p.EditProposed) -> Decision:
        proposals.append(proposal)
        return Decision("accepted")

    summaries, statuses, tools = 0, [], []
    text = TASK
    for _ in range(MAX_TURNS):
        log = await client.run_turn(info.session_id, text, workspace=LocalWorkspace(root),
                                    review=review)  # fmt: skip
        statuses.append(log.done.status)
        tools += [f"{m.tool}({m.args.get('path', '')})" for m in log.of(p.AgentStep)]
        assert log.done.status != "model_error", log.done.message
        summaries += len(log.of(p.SummaryMade))
        if proposals and summaries:
            break
        text = "Continue: " + TASK
    assert tools, f"the model never produced a parsed action: {statuses}"
    print(f"turns: {statuses}; edit proposals: {len(proposals)}; actions: {tools}")

    prefix = "def add(a, b):\n    return "
    request = p.CompletionRequest(
        id="c", session_id=info.session_id, path="a.py", language="python", prefix=prefix
    )
    await client.send(request)
    completion = await client.expect(p.CompletionSuggestion)
    await client.send(
        p.EditOutcome(suggestion_id=completion.suggestion_id, outcome="rejected",
                      client_event_id="completion-1", reason="not now")
    )  # fmt: skip
    await client.expect(p.OutcomeAck)
    await client.close()

    engine = make_engine(pg_head_url)
    with make_sessionmaker(engine)() as db:
        query = select(Suggestion).where(Suggestion.session_id == info.session_id)
        rows = {row.id: row for row in db.scalars(query)}
        assert set(rows) == {completion.suggestion_id} | {x.suggestion_id for x in proposals}
        for row in rows.values():
            assert row.model == vllm_server.model and row.adapter_version is None
            assert len(row.completion_token_ids) == len(row.completion_logprobs) > 0
            assert all(isinstance(t, int) for t in row.completion_token_ids)
            assert all(lp <= 0 for lp in row.completion_logprobs)
            assert row.prompt_messages and row.sampling["max_tokens"] > 0
            outcomes = [o.kind for o in db.scalars(select(Outcome).where(
                Outcome.suggestion_id == row.id))]  # fmt: skip
            expected = "accepted" if row.kind == "edit" else "rejected"
            assert outcomes == [expected], (row.kind, outcomes)
        query = select(SessionEvent).where(
            SessionEvent.session_id == info.session_id, SessionEvent.kind == "summary"
        )
        summary_rows = list(db.scalars(query))
        assert len(summary_rows) == summaries >= 1
        made = summary_rows[0].payload["data"]
        assert made["summary"] and made["completion"]["token_ids"]
    engine.dispose()
