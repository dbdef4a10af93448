"""Per-token limits and oversized frames, on a real server with real sockets.

- One token may hold `max_connections_per_token` connections: one more reads a typed
  `too_many_connections` error and is closed with 1013; closing one makes room again; another
  person's token has its own budget.
- Messages beyond the token's burst and rate get `rate_limited` echoing their id and are not
  handled; after the bucket refills, the same connection is served.
- A frame whose header announces more than uvicorn's ws_max_size is refused (close 1009) as
  soon as the header arrives: the server never waits for, nor buffers, its payload.
Run: .venv/bin/python -m pytest tests/api/test_limits.py -q
"""

from __future__ import annotations

import asyncio
import os
import struct
import time
from typing import Any

import pytest
from websockets.asyncio.client import connect

from agent_server.agent.scripted import ScriptedModel
from agent_server.api.config import UVICORN_WS_MAX_SIZE, ApiConfig
from agent_server.api.limits import TokenLimits
from agent_server.protocol import messages as p
from agent_server.protocol.client import ProtocolClient
from feedback.db import make_engine, make_sessionmaker, transaction
from feedback.queries.users import add_user
from tests.api.server import TOKEN

pytestmark = pytest.mark.postgres


@pytest.fixture
def server(api_settings: Any, serve: Any) -> Any:
    config = ApiConfig(max_connections_per_token=3, messages_per_s=5.0, message_burst=10)
    return serve(api_settings, backend=ScriptedModel([]), config=config)


async def _raw(url: str, token: str) -> Any:
    return await connect(url, proxy=None, open_timeout=5,
                         additional_headers={"Authorization": f"Bearer {token}"})  # fmt: skip


async def test_connections_per_token_are_capped_with_a_clear_error(server: Any) -> None:
    engine = make_engine(server.settings.database_url)
    with transaction(make_sessionmaker(engine)) as s:
        _, ada = add_user(s, "ada")
    engine.dispose()
    held = [await _raw(server.ws_url, TOKEN) for _ in range(3)]
    extra = await _raw(server.ws_url, TOKEN)
    error = p.server_adapter.validate_json(await asyncio.wait_for(extra.recv(), 5))
    assert isinstance(error, p.Error) and error.code == "too_many_connections"
    await asyncio.wait_for(extra.wait_closed(), 5)
    assert extra.close_code == 1013
    # Another person's token is not counted against the shared one.
    other = await ProtocolClient.connect(server.ws_url, ada)
    await other.close()
    # Closing one makes room.
    await held[0].close()
    for _ in range(50):  # the server notices the close on its own loop
        await asyncio.sleep(0.05)
        try:
            again = await ProtocolClient.connect(server.ws_url, TOKEN)
            break
        except Exception:
            continue
    else:
        raise AssertionError("no room after closing a connection")
    await again.close()
    for ws in held[1:]:
        await ws.close()


async def test_messages_over_the_rate_are_refused_then_served_again(server: Any) -> None:
    client = await ProtocolClient.connect(server.ws_url, TOKEN)  # hello: 1 of the burst
    for i in range(30):
        await client.send(p.Ping(id=f"p{i}"))
    replies = [await asyncio.wait_for(client.recv(), 5) for _ in range(30)]
    pongs = [r.id for r in replies if isinstance(r, p.Pong)]
    limited = [r for r in replies if isinstance(r, p.Error)]
    # The burst (10, hello included) plus what refilled meanwhile; the rest refused, each
    # answered with its own id.
    assert 9 <= len(pongs) <= 15, pongs
    assert len(pongs) + len(limited) == 30
    assert {e.code for e in limited} == {"rate_limited"}
    assert {e.id for e in limited} == {f"p{i}" for i in range(30)} - set(pongs)
    await asyncio.sleep(1.0)  # 5 messages/s: room for a few again
    await client.send(p.Ping(id="later"))
    assert await asyncio.wait_for(client.recv(), 5) == p.Pong(id="later")
    await client.close()


async def test_an_oversized_frame_is_refused_from_its_header(server: Any) -> None:
    ws = await _raw(server.ws_url, TOKEN)
    announced = 1 << 30  # 1 GiB, of which we send 16 bytes
    assert announced > UVICORN_WS_MAX_SIZE
    mask = os.urandom(4)
    header = bytes([0x81, 0x80 | 127]) + struct.pack("!Q", announced) + mask
    started = time.monotonic()
    ws.transport.write(header + bytes(b ^ mask[i % 4] for i, b in enumerate(b"x" * 16)))
    await asyncio.wait_for(ws.wait_closed(), 5)
    assert ws.close_code == 1009  # "message too big", without waiting for the payload
    assert time.monotonic() - started < 5
    # The server goes on serving.
    client = await ProtocolClient.connect(server.ws_url, TOKEN)
    await client.close()


def test_token_bucket_refills_at_the_rate() -> None:
    now = [0.0]
    limits = TokenLimits(max_connections=1, messages_per_s=2.0, burst=3, clock=lambda: now[0])
    assert [limits.allow("k") for _ in range(4)] == [True, True, True, False]
    now[0] += 0.5  # one message's worth
    assert [limits.allow("k") for _ in range(2)] == [True, False]
    now[0] += 100  # never more than the burst
    assert sum(limits.allow("k") for _ in range(10)) == 3
    assert limits.open("k") and not limits.open("k")
    limits.close("k")
    assert limits.open("k")
