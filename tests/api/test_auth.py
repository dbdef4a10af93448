"""Who may talk to the server: tokens on HTTP and the WebSocket, browser Origins, token files.

Against a real uvicorn server on loopback and a real PostgreSQL database.
Run: .venv/bin/python -m pytest tests/api/test_auth.py -q
"""

from __future__ import annotations

import stat

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from agent_server.agent.scripted import ScriptedModel
from agent_server.api.auth import AuthConfig, RedactTokenFilter
from agent_server.protocol import messages as p
from agent_server.protocol.client import ProtocolClient
from ground.settings import Settings
from tests.api.server import TOKEN

pytestmark = pytest.mark.postgres


@pytest.fixture
def server(api_settings, serve):
    return serve(api_settings, backend=ScriptedModel([]))


def test_healthz_needs_no_token(server) -> None:
    r = httpx.get(f"{server.http_url}/healthz")
    assert r.status_code == 200
    assert r.json() == {"status": "ok", "protocol_version": p.PROTOCOL_VERSION, "model": "scripted"}


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer wrong-token"}, {"Authorization": TOKEN}]
)
def test_rest_refuses_missing_or_wrong_token(server, headers) -> None:
    r = httpx.get(f"{server.http_url}/v1/sessions", headers=headers)
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == "Bearer"


def test_rest_accepts_the_token(server) -> None:
    r = httpx.get(f"{server.http_url}/v1/sessions", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200
    assert r.json() == []


async def _handshake_status(url: str, **kwargs) -> int:
    """101 when the WebSocket opens, else the HTTP status the handshake was refused with."""
    try:
        async with connect(url, proxy=None, open_timeout=5, **kwargs):
            return 101
    except InvalidStatus as exc:
        return exc.response.status_code


async def test_websocket_refuses_no_token(server) -> None:
    assert await _handshake_status(server.ws_url) == 403


async def test_websocket_refuses_wrong_token(server) -> None:
    headers = {"Authorization": "Bearer not-the-token-at-all"}
    assert await _handshake_status(server.ws_url, additional_headers=headers) == 403
    assert await _handshake_status(f"{server.ws_url}?token=nope") == 403


async def test_websocket_refuses_a_foreign_browser_origin(server) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    status = await _handshake_status(
        server.ws_url, additional_headers=headers, origin="http://attacker.example"
    )
    assert status == 403


async def test_websocket_accepts_header_or_query_token_and_editor_origins(server) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    assert await _handshake_status(server.ws_url, additional_headers=headers) == 101
    assert await _handshake_status(f"{server.ws_url}?token={TOKEN}") == 101
    webview = "vscode-webview://1234abcd"
    assert await _handshake_status(server.ws_url, additional_headers=headers, origin=webview) == 101
    # And the protocol works on a query-token connection.
    client = await ProtocolClient.connect(server.ws_url, TOKEN, token_in_query=True)
    assert client.welcome.protocol_version == p.PROTOCOL_VERSION
    await client.close()


def test_token_files_are_made_private_on_first_start(tmp_path) -> None:
    settings = Settings(home=tmp_path / "home")
    auth = AuthConfig.from_settings(settings)
    for path, value in ((settings.token_file, auth.token), (settings.admin_token_file,
                                                             auth.admin_token)):  # fmt: skip
        assert path.read_text().strip() == value
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert auth.token != auth.admin_token and len(auth.token) >= 32
    # A second start reads the same tokens back.
    again = AuthConfig.from_settings(settings)
    assert (again.token, again.admin_token) == (auth.token, auth.admin_token)


def test_env_token_wins_and_writes_no_file(tmp_path) -> None:
    settings = Settings(home=tmp_path / "home", token=TOKEN)
    auth = AuthConfig.from_settings(settings)
    assert auth.token == TOKEN
    assert not settings.token_file.exists()
    assert auth.check_token(TOKEN) and not auth.check_token(TOKEN + "x")
    assert not auth.check_token(TOKEN, admin=True)
    assert auth.check_token(auth.admin_token, admin=True)


def test_short_tokens_are_refused_with_a_fix(tmp_path) -> None:
    with pytest.raises(ValueError, match="at least 16 characters"):
        AuthConfig.from_settings(Settings(home=tmp_path / "home", token="short"))


def test_query_tokens_are_hidden_in_access_logs() -> None:
    import logging

    record = logging.LogRecord(
        "uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s"', ("127.0.0.1",
        "GET", f"/v1/ws?token={TOKEN}&x=1"), None,
    )  # fmt: skip
    RedactTokenFilter().filter(record)
    assert TOKEN not in record.getMessage()
    assert "token=***&x=1" in record.getMessage()
