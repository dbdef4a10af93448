"""Every request gets an answer: an unexpected failure while handling a message is a typed
`error` echoing the request's id, within a second, and the connection goes on serving.

A test double at the store seam raises where the real store would write; a server on a
database with no schema (what a new user saw: "Task exception was never retrieved" and a
client waiting forever) fails the same way for real. Run:
    .venv/bin/python -m pytest tests/api/test_every_request_answered.py -q
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from pydantic import SecretStr

from agent_server.agent.scripted import ScriptedModel
from agent_server.protocol import messages as p
from agent_server.protocol.client import ProtocolClient
from agent_server.protocol.errors import ErrorCode
from agent_server.session.store import Store
from ground.settings import Settings
from tests.api.server import TOKEN
from tests.fixtures.databases import fresh_pg_database

pytestmark = pytest.mark.postgres


class BrokenStore(Store):
    """The real store, except that writing a suggestion or an outcome raises, as a bug or a
    lost database would."""

    def __init__(self, real: Store) -> None:
        super().__init__(real._factory)

    async def record_suggestion(self, **fields: Any) -> None:
        raise RuntimeError("the store broke while writing a suggestion")

    async def record_outcome(self, **fields: Any) -> Any:
        raise RuntimeError("the store broke while writing an outcome")


def _completion(request_id: str) -> p.CompletionRequest:
    return p.CompletionRequest(
        id=request_id, path="a.py", language="python", prefix="def f():\n    return ", suffix=""
    )


async def _next_reply(client: ProtocolClient, timeout_s: float = 1.0) -> Any:
    return await asyncio.wait_for(client.recv(), timeout_s)


async def test_a_failing_completion_is_answered_and_the_connection_keeps_serving(
    api_settings: Settings, serve: Any, caplog: pytest.LogCaptureFixture
) -> None:
    server = serve(api_settings, backend=ScriptedModel(["1", "2"]))
    real_store = server.services.store
    server.services.store = BrokenStore(real_store)
    client = await ProtocolClient.connect(server.ws_url, TOKEN)
    with caplog.at_level(logging.ERROR, logger="agent_server.api.connection"):
        await client.send(_completion("req-broken"))
        reply = await _next_reply(client)
    assert isinstance(reply, p.Error)
    assert (reply.id, reply.code) == ("req-broken", ErrorCode.INTERNAL)
    # Logged once, with the request id, and the cause kept for whoever reads the log.
    logged = [r for r in caplog.records if "req-broken" in r.getMessage()]
    assert len(logged) == 1 and logged[0].exc_info is not None

    # A handler that raises on the read loop itself (edit.outcome writes in it).
    outcome = p.EditOutcome(
        id="req-outcome", suggestion_id="s-1", outcome="accepted", client_event_id="e-1"
    )
    await client.send(outcome)
    reply = await _next_reply(client)
    assert isinstance(reply, p.Error) and (reply.id, reply.code) == ("req-outcome", "internal")

    # The same connection then serves well-formed requests: a session, and a completion
    # once the store works again.
    assert (await client.create_session()).session_id
    server.services.store = real_store
    await client.send(_completion("req-good"))
    reply = await _next_reply(client, timeout_s=10)
    assert isinstance(reply, p.CompletionSuggestion) and reply.id == "req-good"
    assert reply.text == "2"  # the second scripted output: the first was spent before the fault
    await client.close()


async def test_a_database_without_schema_answers_each_request(tmp_path: Any, serve: Any) -> None:
    with fresh_pg_database() as empty_url:  # no `apprentice db upgrade` was run on it
        settings = Settings(home=tmp_path / "home", database_url=empty_url, token=SecretStr(TOKEN))
        server = serve(settings, backend=ScriptedModel(["x"] * 3))
        client = await ProtocolClient.connect(server.ws_url, TOKEN)
        for i in range(2):
            await client.send(_completion(f"req-{i}"))
            reply = await _next_reply(client)
            assert isinstance(reply, p.Error) and reply.id == f"req-{i}"
        await client.send(p.SessionCreate(id="create", mode="interactive"))
        reply = await _next_reply(client)
        assert isinstance(reply, p.Error) and reply.id == "create"
        await client.send(p.Ping(id="still-there"))
        assert (await _next_reply(client)) == p.Pong(id="still-there")
        await client.close()
        server.stop()
