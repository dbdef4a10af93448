"""Sessions live in the database: a session summarized on one server continues, after a
restart, on a new server process's app from its last summary.

Run: .venv/bin/python -m pytest tests/api/test_restart.py -q
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select

from agent_server.agent.scripted import ScriptedModel
from agent_server.agent.summarizer import SummarizerConfig
from agent_server.agent.workspace import LocalWorkspace
from agent_server.api.config import ApiConfig
from agent_server.protocol import messages as p
from agent_server.protocol.client import ProtocolClient
from feedback.db import make_engine, make_sessionmaker
from feedback.models import SessionEvent
from tests.api.server import TOKEN

pytestmark = pytest.mark.postgres
FILES = 8
# 1 token per character: the system prompt alone is ~1,800; the reads fill the rest.
WINDOW = 4096
TASK = "Read every data file, then report. (task kept verbatim: 7f3a)"


def act(tool: str, **args: str) -> str:
    return json.dumps({"thought": "next", "tool": tool, "args": args})


def _summary(messages: list[dict]) -> str:
    # The summary names the files the summarized turns read, as a real summary would.
    seen = sorted({f"f{i}.py" for i in range(FILES) if f"MARKER-{i}" in str(messages)})
    return f"SUMMARY: read {', '.join(seen)}"


async def test_session_resumes_after_restart_from_its_last_summary(
    api_settings, serve, tmp_path: Path
) -> None:
    root = tmp_path / "project"
    root.mkdir()
    for i in range(FILES):
        (root / f"f{i}.py").write_text(f'DATA_{i} = "{"x" * 300}"  # MARKER-{i}\n')
    # The window fills after a few reads: summaries happen.
    config = ApiConfig(
        summarizer=SummarizerConfig(
            budget_ratio=0.8, target_ratio=0.5, max_summary_tokens=200, keep_last_turns=1
        )
    )
    first = ScriptedModel(
        [act("read_file", path=f"f{i}.py") for i in range(FILES)] + [act("finish", message="1")],
        summary=_summary,
        context_window=WINDOW,
    )
    server = serve(api_settings, backend=first, config=config)
    client = await ProtocolClient.connect(server.ws_url, TOKEN)
    info = await client.create_session(mode="autonomous")
    log = await client.run_turn(info.session_id, TASK, workspace=LocalWorkspace(root))
    assert log.done.status == "finished", log.done.message
    summaries = log.of(p.SummaryMade)
    assert len(summaries) >= 2
    assert all(m.tokens_after < m.tokens_before for m in summaries)
    last_summary = summaries[-1].summary
    await client.close()
    server.stop()

    engine = make_engine(api_settings.database_url)
    with make_sessionmaker(engine)() as db:
        query = select(SessionEvent).where(
            SessionEvent.session_id == info.session_id, SessionEvent.kind == "summary"
        )
        stored = list(db.scalars(query))
    engine.dispose()
    assert [e.payload["data"]["summary"] for e in stored][-1] == last_summary

    # A new app on the same database: nothing of the first one is in memory.
    second = ScriptedModel([act("finish", message="continued")], summary=_summary,
                           context_window=WINDOW)  # fmt: skip
    server2 = serve(api_settings, backend=second, config=config)
    client = await ProtocolClient.connect(server2.ws_url, TOKEN)
    resumed = await client.resume(info.session_id)
    assert resumed.resumed and resumed.mode == "autonomous"
    kinds = [e.kind for e in resumed.transcript]
    assert kinds[:2] == ["task", "summary"] and resumed.transcript[0].text == TASK
    assert resumed.transcript[1].text == last_summary
    log = await client.run_turn(info.session_id, "what did you find?",
                                workspace=LocalWorkspace(root))  # fmt: skip
    assert (log.done.status, log.done.message) == ("finished", "continued")
    # The first model call of the new server is built on the stored last summary (it may be
    # a further summary request: the resumed view plus the new message can be over budget).
    first_call = json.dumps(second.calls[0].messages)
    assert last_summary in first_call and TASK in first_call
    agent_prompt = json.dumps([c.messages for c in second.calls if c.kind == "agent"][0])
    assert TASK in agent_prompt and "what did you find?" in agent_prompt
    # Turns folded into earlier summaries are gone for good.
    for prompt in (first_call, agent_prompt):
        assert "MARKER-0" not in prompt and "MARKER-1" not in prompt
    await client.close()
