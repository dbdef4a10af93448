"""A session over the WebSocket, end to end: real uvicorn server, real PostgreSQL, the agent
loop driven by a ScriptedModel, the editor played by ProtocolClient over a LocalWorkspace.

Run: .venv/bin/python -m pytest tests/api/test_ws_session.py -q
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from agent_server.agent.scripted import ScriptedModel
from agent_server.agent.workspace import LocalWorkspace
from agent_server.protocol import messages as p
from agent_server.protocol.client import Decision, ProtocolClient, ProtocolError
from feedback.db import make_engine, make_sessionmaker
from feedback.models import Outcome, SessionEvent, Suggestion
from tests.api.server import TOKEN

pytestmark = pytest.mark.postgres


def act(tool: str, **args: str) -> str:
    return json.dumps({"thought": f"use {tool}", "tool": tool, "args": args})


@pytest.fixture
def db(api_settings):
    engine = make_engine(api_settings.database_url)
    yield make_sessionmaker(engine)
    engine.dispose()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "a.py").write_text("x = 1\n")
    return root


async def _client(server) -> ProtocolClient:
    return await ProtocolClient.connect(server.ws_url, TOKEN)


async def test_edit_is_recorded_before_it_is_shown_and_outcome_before_ack(
    api_settings, serve, db, workspace
) -> None:
    model = ScriptedModel([
        act("read_file", path="a.py"),
        act("edit", path="a.py", search="x = 1", replace="x = 2"),
        act("finish", message="x is 2 now"),
    ])  # fmt: skip
    server = serve(api_settings, backend=model)
    client = await _client(server)
    info = await client.create_session(title="demo")
    seen: dict[str, object] = {}

    def review(proposal: p.EditProposed) -> Decision:
        with db() as s:  # the suggestion row must exist the moment the proposal is seen
            seen["suggestion"] = s.get(Suggestion, proposal.suggestion_id)
        return Decision("accepted")

    def on_message(message: object) -> None:
        if isinstance(message, p.OutcomeAck):
            with db() as s:  # ... and the outcome row the moment it is acknowledged
                seen["outcome"] = s.get(Outcome, int(message.outcome_id))

    log = await client.run_turn(
        info.session_id, "set x to 2", workspace=LocalWorkspace(workspace), review=review,
        on_message=on_message,
    )  # fmt: skip
    assert log.done.status == "finished" and log.done.message == "x is 2 now"
    assert log.done.usage.model_calls == 3 and log.done.usage.completion_tokens > 0
    assert (workspace / "a.py").read_text() == "x = 2\n"
    suggestion = seen["suggestion"]
    assert isinstance(suggestion, Suggestion)
    assert suggestion.kind == "edit" and suggestion.session_id == info.session_id
    assert suggestion.file_path == "a.py" and "+x = 2" in suggestion.proposed
    assert len(suggestion.completion_token_ids) == len(suggestion.completion_logprobs) > 0
    assert suggestion.prompt_messages[0]["role"] == "system"
    users = [m["content"] for m in suggestion.prompt_messages if m["role"] == "user"]
    assert any("set x to 2" in text for text in users)  # after the agent's few-shot turns
    outcome = seen["outcome"]
    assert isinstance(outcome, Outcome) and outcome.kind == "accepted"
    assert outcome.suggestion_id == suggestion.id
    # Every message of the turn echoes the user.message id; the steps were forwarded.
    assert {m.id for m in log.messages if not isinstance(m, p.OutcomeAck)} == {log.done.id}
    assert [m.tool for m in log.of(p.AgentStep)] == ["read_file", "edit"]
    assert "".join(m.text for m in log.of(p.AssistantDelta)).count('"tool"') == 3
    # The trajectory is in the database, in order, and readable over REST.
    with db() as s:
        rows = list(s.scalars(select(SessionEvent).where(
            SessionEvent.session_id == info.session_id).order_by(SessionEvent.seq)))  # fmt: skip
    kinds = [r.payload["kind"] for r in rows]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert kinds.index("edit_proposed") < kinds.index("edit_decision")
    assert [r.seq for r in rows] == list(range(1, len(rows) + 1))
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=server.http_url, headers=headers) as http:
        listed = (await http.get("/v1/sessions")).json()
        events = (await http.get(f"/v1/sessions/{info.session_id}/events?since_seq=2")).json()
        missing = await http.get("/v1/sessions/nope")
    assert [s["id"] for s in listed] == [info.session_id] and listed[0]["title"] == "demo"
    assert [e["seq"] for e in events] == [r.seq for r in rows[2:]]
    assert missing.status_code == 404
    await client.close()


async def test_rejection_reason_reaches_the_model(api_settings, serve, workspace) -> None:
    model = ScriptedModel([
        act("edit", path="a.py", search="x = 1", replace="x = 3"),
        act("finish", message="ok"),
    ])  # fmt: skip
    server = serve(api_settings, backend=model)
    client = await _client(server)
    info = await client.create_session()
    reject = Decision("rejected", reason="use the constant LIMIT instead")
    log = await client.run_turn(
        info.session_id, "change x", workspace=LocalWorkspace(workspace), review=lambda _: reject
    )
    assert log.done.status == "finished"
    assert (workspace / "a.py").read_text() == "x = 1\n"  # untouched
    last_prompt = json.dumps(model.calls[-1].messages)
    assert "use the constant LIMIT instead" in last_prompt
    await client.close()


async def test_partial_accept_applies_only_the_chosen_hunk(api_settings, serve, workspace) -> None:
    lines = [f"v{i} = {i}\n" for i in range(20)]
    (workspace / "b.py").write_text("".join(lines))
    new = list(lines)
    new[1], new[18] = "v1 = 100\n", "v18 = 1800\n"
    model = ScriptedModel([
        act("edit", path="b.py", search="".join(lines), replace="".join(new)),
        act("finish", message="ok"),
    ])  # fmt: skip
    server = serve(api_settings, backend=model)
    client = await _client(server)
    info = await client.create_session()
    proposals: list[p.EditProposed] = []

    def review(proposal: p.EditProposed) -> Decision:
        proposals.append(proposal)
        return Decision("partially_accepted", hunks=[1])

    log = await client.run_turn(
        info.session_id, "bump", workspace=LocalWorkspace(workspace), review=review
    )
    assert log.done.status == "finished"
    assert [h.index for h in proposals[0].hunks] == [0, 1]
    text = (workspace / "b.py").read_text()
    assert "v18 = 1800\n" in text and "v1 = 1\n" in text and "v1 = 100" not in text
    await client.close()


async def test_outcomes_are_idempotent_and_conflicts_typed(api_settings, serve, db) -> None:
    server = serve(api_settings, backend=ScriptedModel(["    return a + b"]))
    client = await _client(server)
    await client.send(p.CompletionRequest(id="c1", path="m.py", language="python",
                                          prefix="def add(a, b):\n", suffix="\n"))  # fmt: skip
    suggestion = await client.expect(p.CompletionSuggestion)
    assert suggestion.id == "c1" and suggestion.text == "    return a + b"
    with db() as s:  # stored before it was sent
        row = s.get(Suggestion, suggestion.suggestion_id)
        assert row is not None and row.kind == "completion" and row.file_path == "m.py"
        assert len(row.completion_token_ids) == len(row.completion_logprobs) > 0
    outcome = p.EditOutcome(id="o1", suggestion_id=suggestion.suggestion_id, outcome="accepted",
                            client_event_id="evt-1", accepted_length=16)  # fmt: skip
    await client.send(outcome)
    first = await client.expect(p.OutcomeAck)
    await client.send(outcome.model_copy(update={"id": "o2"}))
    second = await client.expect(p.OutcomeAck)
    assert (first.id, second.id) == ("o1", "o2")
    assert first.outcome_id == second.outcome_id
    assert (first.duplicate, second.duplicate) == (False, True)
    with db() as s:
        rows = list(s.scalars(select(Outcome).where(Outcome.client_event_id == "evt-1")))
    assert len(rows) == 1 and rows[0].accepted_length == 16
    await client.send(outcome.model_copy(update={"id": "o3", "outcome": "rejected"}))
    with pytest.raises(ProtocolError) as err:
        await client.expect(p.OutcomeAck)
    assert err.value.error.code == "outcome_conflict" and err.value.error.id == "o3"
    await client.send(outcome.model_copy(update={"id": "o4", "suggestion_id": "nope"}))
    with pytest.raises(ProtocolError, match="suggestion_not_found"):
        await client.expect(p.OutcomeAck)
    await client.close()


async def test_commands_wait_for_approval(api_settings, serve, workspace) -> None:
    model = ScriptedModel([
        act("run_command", command="echo refused-run"),
        act("run_command", command="echo hello-from-the-editor"),
        act("finish", message="ran"),
    ])  # fmt: skip
    server = serve(api_settings, backend=model)
    client = await _client(server)
    info = await client.create_session()
    asked: list[str] = []

    def approve(request: p.CommandApprovalRequest) -> bool:
        asked.append(request.command)
        return "hello" in request.command

    log = await client.run_turn(
        info.session_id, "run it", workspace=LocalWorkspace(workspace), approve=approve
    )
    assert log.done.status == "finished"
    assert asked == ["echo refused-run", "echo hello-from-the-editor"]
    runs = [m for m in log.of(p.ToolRequest) if m.method == "run_command"]
    assert len(runs) == 1  # the refused command never reached the editor
    assert "hello-from-the-editor" in log.of(p.AgentStep)[-1].observation
    await client.close()


async def test_cancel_stops_the_turn_and_one_turn_runs_at_a_time(
    api_settings, serve, workspace
) -> None:
    model = ScriptedModel([act("finish", message="late")], delay_s=30)
    server = serve(api_settings, backend=model)
    client = await _client(server)
    info = await client.create_session()
    await client.send(p.UserMessage(id="t1", session_id=info.session_id, text="slow"))
    await client.send(p.UserMessage(id="t2", session_id=info.session_id, text="again"))
    busy = await client.expect(p.Error)
    assert (busy.code, busy.id, busy.session_id) == ("turn_in_progress", "t2", info.session_id)
    started = time.monotonic()
    await client.send(p.Cancel(id="c", session_id=info.session_id))
    done = await client.expect(p.TurnDone)
    assert done.status == "cancelled" and done.id == "t1"
    assert time.monotonic() - started < 5
    await client.send(p.Cancel(id="c2", session_id=info.session_id))
    assert (await client.expect(p.Error)).code == "no_turn"
    await client.close()


async def test_sessions_belong_to_their_connection(api_settings, serve, workspace) -> None:
    model = ScriptedModel([act("finish", message="first"), act("finish", message="second")])
    server = serve(api_settings, backend=model)
    a, b = await _client(server), await _client(server)
    info = await a.create_session()
    log = await a.run_turn(info.session_id, "hello", workspace=LocalWorkspace(workspace))
    assert log.done.message == "first"
    await b.send(p.UserMessage(id="x", session_id=info.session_id, text="mine now"))
    assert (await b.expect(p.Error)).code == "session_not_owned"
    await b.send(p.SessionResume(id="r", session_id=info.session_id))
    assert (await b.expect(p.Error)).code == "session_in_use"
    await b.send(p.SessionResume(id="r2", session_id="00000000-0000-0000-0000-000000000000"))
    assert (await b.expect(p.Error)).code == "session_not_found"
    await a.close()
    for _ in range(100):  # the server notices the close and releases the session
        if info.session_id not in server.services.sessions.live:
            break
        await asyncio.sleep(0.05)
    resumed = await b.resume(info.session_id)
    assert resumed.resumed and resumed.transcript[0].kind == "task"
    assert resumed.transcript[0].text == "hello"
    log = await b.run_turn(info.session_id, "and now?", workspace=LocalWorkspace(workspace))
    assert log.done.message == "second"
    follow_up = json.dumps(model.calls[-1].messages)
    assert "and now?" in follow_up and "hello" in follow_up  # the context carried over
    await b.close()


async def test_hello_first_and_matching_version(api_settings, serve) -> None:
    server = serve(api_settings, backend=ScriptedModel([]))
    client = await _client(server)
    from websockets.asyncio.client import connect

    async with connect(server.ws_url, proxy=None,
                       additional_headers={"Authorization": f"Bearer {TOKEN}"}) as raw:  # fmt: skip
        await raw.send(p.encode(p.SessionCreate(id="s")))
        error = p.server_adapter.validate_json(await raw.recv())
        assert (error.code, error.id) == ("hello_required", "s")
        await raw.send(json.dumps({"type": "hello", "protocol_version": 99, "id": "h"}))
        error = p.server_adapter.validate_json(await raw.recv())
        assert (error.code, error.id) == ("unsupported_version", "h")
        await raw.send(json.dumps({"type": "ping", "id": "still-open"}))
        assert p.server_adapter.validate_json(await raw.recv()).id == "still-open"
    await client.close()


async def test_a_disconnect_mid_review_cancels_the_turn_and_frees_the_session(
    api_settings, serve, db, workspace
) -> None:
    model = ScriptedModel([
        act("edit", path="a.py", search="x = 1", replace="x = 5"),
        act("finish", message="after reconnect"),
    ])  # fmt: skip
    server = serve(api_settings, backend=model)
    client = await _client(server)
    info = await client.create_session()
    await client.send(p.UserMessage(id="t", session_id=info.session_id, text="change x"))
    while not isinstance(message := await client.recv(), p.EditProposed):
        if isinstance(message, p.ToolRequest):
            from agent_server.agent.client_workspace import answer_request
            from agent_server.protocol.client import tool_result_message

            reply = await answer_request(LocalWorkspace(workspace), message.method, message.params)
            await client.send(tool_result_message(message.request_id, reply))
    await client.close()  # the person closes the editor while the diff is on screen
    for _ in range(100):
        if info.session_id not in server.services.sessions.live:
            break
        await asyncio.sleep(0.05)
    with db() as s:
        rows = list(s.scalars(select(SessionEvent).where(
            SessionEvent.session_id == info.session_id).order_by(SessionEvent.seq)))  # fmt: skip
    assert rows[-1].payload["kind"] == "run_finished"
    assert rows[-1].payload["data"]["status"] == "cancelled"
    assert (workspace / "a.py").read_text() == "x = 1\n"
    again = await _client(server)
    assert (await again.resume(info.session_id)).resumed
    log = await again.run_turn(info.session_id, "go on", workspace=LocalWorkspace(workspace))
    assert log.done.message == "after reconnect"
    await again.close()
