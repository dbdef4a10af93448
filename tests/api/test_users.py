"""Many people on one server: each with their own token, their rows attributed to them.

A real server on a fresh PostgreSQL database and real WebSocket clients: two users' tokens
and the shared token work side by side; sessions, suggestions and outcomes record whose
they are (read back from the database); a user cannot resume, read or answer for another's
session or suggestion; a revoked or rotated-away token is refused on the WebSocket and over
HTTP; an admin user's token opens the admin API, a plain user's does not; the admin API
lists users and filters outcomes by user. Run:
    .venv/bin/python -m pytest tests/api/test_users.py -q
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from sqlalchemy import select
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from agent_server.agent.scripted import ScriptedModel
from agent_server.protocol import messages as p
from agent_server.protocol.client import ProtocolClient, ProtocolError
from feedback.db import make_engine, make_sessionmaker, transaction
from feedback.models import AgentSession, Outcome, Suggestion
from feedback.queries.users import add_user, revoke_user, rotate_user
from tests.api.server import ADMIN_TOKEN, TOKEN

pytestmark = pytest.mark.postgres


@pytest.fixture
def team(api_settings: Any, serve: Any) -> Any:
    settings = api_settings.model_copy(update={"admin_token": SecretStr(ADMIN_TOKEN)})
    server = serve(settings, backend=ScriptedModel([f"x{i}" for i in range(20)]))
    engine = make_engine(settings.database_url)
    db = make_sessionmaker(engine)
    with transaction(db) as s:
        ada, ada_token = add_user(s, "ada")
        bob, bob_token = add_user(s, "bob")
        _, root_token = add_user(s, "root", admin=True)
        ids = {"ada": ada.id, "bob": bob.id}
    yield server, db, ids, {"ada": ada_token, "bob": bob_token, "root": root_token}
    engine.dispose()


async def _complete(client: ProtocolClient, request_id: str, session_id: str | None = None) -> str:
    await client.send(
        p.CompletionRequest(id=request_id, path="a.py", language="python", prefix="x = ",
                            suffix="", session_id=session_id)
    )  # fmt: skip
    return (await client.expect(p.CompletionSuggestion)).suggestion_id


async def _outcome(client: ProtocolClient, suggestion_id: str, event_id: str) -> Any:
    await client.send(
        p.EditOutcome(suggestion_id=suggestion_id, outcome="accepted", client_event_id=event_id)
    )
    return await client.recv()


async def _handshake_status(url: str, token: str) -> int:
    try:
        async with connect(url, proxy=None, open_timeout=5,
                           additional_headers={"Authorization": f"Bearer {token}"}):  # fmt: skip
            return 101
    except InvalidStatus as exc:
        return exc.response.status_code


async def test_rows_are_attributed_and_users_keep_to_their_own(team: Any) -> None:
    server, db, ids, tokens = team
    ada = await ProtocolClient.connect(server.ws_url, tokens["ada"])
    bob = await ProtocolClient.connect(server.ws_url, tokens["bob"])
    shared = await ProtocolClient.connect(server.ws_url, TOKEN)

    ada_session = (await ada.create_session(title="ada's")).session_id
    ada_suggestion = await _complete(ada, "a1", ada_session)
    bob_suggestion = await _complete(bob, "b1")
    shared_suggestion = await _complete(shared, "s1")
    ack = await _outcome(ada, ada_suggestion, "ev-ada")
    assert isinstance(ack, p.OutcomeAck) and not ack.duplicate
    assert isinstance(await _outcome(bob, bob_suggestion, "ev-bob"), p.OutcomeAck)
    assert isinstance(await _outcome(shared, shared_suggestion, "ev-shared"), p.OutcomeAck)

    # Bob cannot answer for Ada's suggestion (it looks missing to him)...
    reply = await _outcome(bob, ada_suggestion, "ev-bob-on-ada")
    assert isinstance(reply, p.Error) and reply.code == "suggestion_not_found"
    # ...nor take her session once she has left it, nor can the shared token.
    await ada.close()
    for other in (bob, shared):
        with pytest.raises(ProtocolError) as refused:
            await other.resume(ada_session)
        assert refused.value.error.code == "session_not_owned"
    # Ada, back with her own token, resumes it.
    ada = await ProtocolClient.connect(server.ws_url, tokens["ada"])
    assert (await ada.resume(ada_session)).session_id == ada_session

    with transaction(db) as s:
        assert s.get(AgentSession, ada_session).user_id == ids["ada"]
        suggestions = {r[0]: r[1] for r in s.execute(select(Suggestion.id, Suggestion.user_id))}
        outcomes = {r[0]: r[1] for r in s.execute(select(Outcome.client_event_id, Outcome.user_id))}
    assert suggestions == {ada_suggestion: ids["ada"], bob_suggestion: ids["bob"],
                           shared_suggestion: None}  # fmt: skip
    assert outcomes == {"ev-ada": ids["ada"], "ev-bob": ids["bob"], "ev-shared": None}
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    for user, count in (("ada", 1), ("bob", 1), (None, 3)):
        params = {"user": user} if user else {}
        r = httpx.get(f"{server.http_url}/v1/admin/stats/outcomes", params=params, headers=admin)
        assert sum(row["n"] for row in r.json()["rows"]) == count, user

    # Over HTTP, each sees only their own sessions; the admin sees every one.
    def listed(token: str) -> list[str]:
        r = httpx.get(f"{server.http_url}/v1/sessions",
                      headers={"Authorization": f"Bearer {token}"})  # fmt: skip
        assert r.status_code == 200
        return [row["id"] for row in r.json()]

    assert listed(tokens["ada"]) == [ada_session]
    assert listed(tokens["bob"]) == [] and listed(TOKEN) == []
    assert listed(ADMIN_TOKEN) == [ada_session]
    r = httpx.get(f"{server.http_url}/v1/sessions/{ada_session}/events",
                  headers={"Authorization": f"Bearer {tokens['bob']}"})  # fmt: skip
    assert r.status_code == 404
    for client in (ada, bob, shared):
        await client.close()


async def test_revoked_and_rotated_tokens_are_refused(team: Any) -> None:
    server, db, _, tokens = team
    assert await _handshake_status(server.ws_url, tokens["ada"]) == 101
    with transaction(db) as s:
        revoke_user(s, "ada")
        new_bob = rotate_user(s, "bob")
    assert await _handshake_status(server.ws_url, tokens["ada"]) == 403
    assert await _handshake_status(server.ws_url, tokens["bob"]) == 403
    assert await _handshake_status(server.ws_url, new_bob) == 101
    headers = {"Authorization": f"Bearer {tokens['ada']}"}
    assert httpx.get(f"{server.http_url}/v1/sessions", headers=headers).status_code == 401
    # A rotation gives a revoked user a token that works again.
    with transaction(db) as s:
        again = rotate_user(s, "ada")
    assert await _handshake_status(server.ws_url, again) == 101


def test_admin_users_and_the_admin_api_by_user(team: Any) -> None:
    server, db, _, tokens = team

    def get(path: str, token: str, **params: Any) -> httpx.Response:
        return httpx.get(f"{server.http_url}{path}", params=params,
                         headers={"Authorization": f"Bearer {token}"})  # fmt: skip

    assert get("/v1/admin/users", tokens["ada"]).status_code == 403
    listed = get("/v1/admin/users", tokens["root"])
    assert listed.status_code == 200
    assert [(u["name"], u["admin"]) for u in listed.json()] == [
        ("ada", False),
        ("bob", False),
        ("root", True),
    ]
    assert all("token" not in key for u in listed.json() for key in u)
    everyone = get("/v1/admin/stats/outcomes", ADMIN_TOKEN)
    assert everyone.status_code == 200 and everyone.json()["users"] == ["ada", "bob", "root"]
    assert get("/v1/admin/stats/outcomes", ADMIN_TOKEN, user="nobody").status_code == 422
