"""The whole web wing on real parts: a WebSocket session against the real vLLM server (CPU
build) on the dev model, the backend built by the factory from Settings, the feedback in a
real PostgreSQL database.

The context budget is small (half of the dev model's 2048-token window), so the agent must
summarize. The task quotes the exact text to replace, and turns continue (follow-up
messages) until the model has proposed an edit the person accepts, bounded in turns: a
barely trained model picks its tools almost at random, but its actions always parse
(JSON-schema constrained decoding), and an `edit` with an empty or quoted SEARCH becomes a
proposal. An inline completion is exercised too. Afterwards PostgreSQL holds a suggestion
with token ids and logprobs, its outcome, and a summary event.
Run: .venv/bin/python -m pytest tests/api/test_integration_vllm.py -q
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from agent_server.agent.loop import AgentConfig
from agent_server.agent.summarizer import SummarizerConfig
from agent_server.agent.workspace import LocalWorkspace
from agent_server.api import protocol as p
from agent_server.api.client import Decision, ProtocolClient
from agent_server.api.config import ApiConfig
from agent_server.models.base import Sampling
from apprentice.settings import Settings
from feedback.db import make_engine, make_sessionmaker
from feedback.models import Outcome, SessionEvent, Suggestion
from tests.api.server import TOKEN

pytestmark = [pytest.mark.vllm, pytest.mark.postgres, pytest.mark.slow]
MAX_TURNS = 6
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

    summaries, statuses = 0, []
    text = TASK
    for _ in range(MAX_TURNS):
        log = await client.run_turn(info.session_id, text, workspace=LocalWorkspace(root),
                                    review=review)  # fmt: skip
        statuses.append(log.done.status)
        assert log.done.status != "model_error", log.done.message
        summaries += len(log.of(p.SummaryMade))
        if proposals and summaries:
            break
        text = "Continue: " + TASK
    assert proposals, f"no edit proposed in {len(statuses)} turns: {statuses}"

    prefix = "def add(a, b):\n    return "
    await client.send(
        p.CompletionRequest(id="c", path="b.py", language="python", prefix=prefix, suffix="\n")
    )
    completion = await client.expect(p.CompletionSuggestion)
    await client.send(p.EditOutcome(suggestion_id=completion.suggestion_id, outcome="rejected",
                                    client_event_id="completion-1", reason="not now"))  # fmt: skip
    await client.expect(p.OutcomeAck)
    await client.close()

    engine = make_engine(pg_head_url)
    with make_sessionmaker(engine)() as db:
        edit = db.get(Suggestion, proposals[0].suggestion_id)
        assert edit is not None and edit.kind == "edit" and edit.session_id == info.session_id
        assert edit.model == vllm_server.model and edit.adapter_version is None
        assert len(edit.completion_token_ids) == len(edit.completion_logprobs) > 0
        assert all(isinstance(t, int) for t in edit.completion_token_ids)
        assert all(lp <= 0 for lp in edit.completion_logprobs)
        outcomes = list(db.scalars(select(Outcome).where(Outcome.suggestion_id == edit.id)))
        assert [o.kind for o in outcomes] == ["accepted"]
        inline = db.get(Suggestion, completion.suggestion_id)
        assert inline is not None and inline.kind == "completion"
        assert len(inline.completion_token_ids) == len(inline.completion_logprobs) > 0
        query = select(SessionEvent).where(
            SessionEvent.session_id == info.session_id, SessionEvent.kind == "summary"
        )
        summary_rows = list(db.scalars(query))
        assert len(summary_rows) == summaries >= 1
        made = summary_rows[0].payload["data"]
        assert made["summary"] and made["completion"]["token_ids"]
    engine.dispose()
