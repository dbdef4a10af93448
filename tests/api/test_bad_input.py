"""Bad input on the WebSocket: typed errors, and the connection and server keep working.

Named cases first, then a seeded fuzz of 1,500 frames (random bytes, random text, random
JSON, mutated valid messages) on one connection of a real server; afterwards a well-formed
session runs correctly on the same server. Run:
    .venv/bin/python -m pytest tests/api/test_bad_input.py -q
"""

from __future__ import annotations

import json
import random
import string
from pathlib import Path
from typing import Any

import pytest

from agent_server.agent.scripted import ScriptedModel
from agent_server.agent.workspace import LocalWorkspace
from agent_server.api.config import ApiConfig
from agent_server.protocol import messages as p
from agent_server.protocol.client import ProtocolClient
from agent_server.protocol.errors import ErrorCode
from tests.api.server import TOKEN

pytestmark = pytest.mark.postgres
SEED = 20240607
FUZZ_FRAMES = 1500


async def _reply(client: ProtocolClient, frame: str | bytes) -> list[Any]:
    """Send one frame, then a ping; return every reply before the pong (validated)."""
    await client.ws.send(frame)
    marker = f"sync-{random.random()}"
    await client.send(p.Ping(id=marker))
    replies = []
    while True:
        message = await client.recv()
        if isinstance(message, p.Pong) and message.id == marker:
            return replies
        replies.append(message)


@pytest.fixture
def server(api_settings, serve):
    outputs = [json.dumps({"thought": "t", "tool": "finish", "args": {"message": "all good"}})]
    # Rate limits off: this file fires thousands of frames to test what handling each does;
    # the limits themselves are tests/api/test_limits.py's.
    config = ApiConfig(messages_per_s=1e6, message_burst=10**6)
    return serve(api_settings, backend=ScriptedModel(outputs), config=config)


@pytest.mark.parametrize(
    ("frame", "code", "frame_id"),
    [
        ("{not json", "bad_json", None),
        ("[1, 2]", "bad_message", None),
        ('{"id": "a"}', "bad_message", "a"),
        ('{"type": "launch.missiles", "id": "b"}', "unknown_type", "b"),
        ('{"type": "welcome", "server": "x", "model": "y"}', "unknown_type", None),
        ('{"type": "user.message", "id": "c", "session_id": "s", "text": 5}',
         "invalid_message", "c"),
        ('{"type": "ping", "id": "d", "extra": true}', "invalid_message", "d"),
        ('{"type": "cancel", "id": 7, "session_id": "s"}', "invalid_message", None),
        ('{"type": "session.resume", "id": "e", "session_id": "x"}', "session_not_found", "e"),
        ('{"type": "tool.result", "id": "f", "request_id": "nope"}', "unknown_request", "f"),
        (b"\x00\xffbinary", "binary_frame", None),
        ('{"type": "ping", "id": "big", "pad": "' + "x" * (1024 * 1024) + '"}',
         "frame_too_large", None),
    ],
)  # fmt: skip
async def test_bad_frames_get_typed_errors(server, frame, code, frame_id) -> None:
    client = await ProtocolClient.connect(server.ws_url, TOKEN)
    replies = await _reply(client, frame)
    assert len(replies) == 1 and isinstance(replies[0], p.Error)
    assert (replies[0].code, replies[0].id) == (code, frame_id)
    assert replies[0].message
    # Still open and still speaking the protocol.
    assert (await client.create_session()).session_id
    await client.close()


def _valid_messages() -> list[dict[str, Any]]:
    sid = "00000000-0000-0000-0000-000000000000"
    messages: list[p._Message] = [
        p.Hello(protocol_version=p.PROTOCOL_VERSION, client="fuzz"),
        p.SessionCreate(mode="autonomous", title="t"),
        p.SessionResume(session_id=sid),
        p.UserMessage(session_id=sid, text="hi", context=p.EditorContext(path="a.py")),
        p.ToolResult(request_id="r1", result={"text": "x"}),
        p.EditOutcome(suggestion_id="s1", outcome="rejected", client_event_id="e1", reason="no"),
        p.CommandApprovalResponse(request_id="r2", approved=True),
        p.Cancel(session_id=sid),
        p.Ping(),
    ]
    return [json.loads(p.encode(m.model_copy(update={"id": "m"}))) for m in messages]


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    kinds = ["int", "float", "str", "bool", "null"] + (["list", "dict"] if depth < 3 else [])
    kind = rng.choice(kinds)
    if kind == "int":
        return rng.choice([0, -1, 2**63, rng.randint(-1000, 1000)])
    if kind == "float":
        return rng.uniform(-1e6, 1e6)
    if kind == "str":
        return "".join(rng.choice(string.printable + "é☃\u2028") for _ in range(rng.randint(0, 20)))
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "null":
        return None
    if kind == "list":
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    size = rng.randint(0, 4)
    return {str(rng.randint(0, 99)): _random_value(rng, depth + 1) for _ in range(size)}


def _mutate(rng: random.Random, message: dict[str, Any]) -> dict[str, Any]:
    out = dict(message)
    for _ in range(rng.randint(1, 3)):
        action = rng.choice(["drop", "retype", "add", "type"])
        keys = list(out)
        if action == "drop" and keys:
            out.pop(rng.choice(keys))
        elif action == "retype" and keys:
            out[rng.choice(keys)] = _random_value(rng)
        elif action == "add":
            out[rng.choice(["zzz", "id", "session_id", "text", "type"])] = _random_value(rng)
        else:
            out["type"] = rng.choice(["hello", "ping", "user.message", "turn.done", "", "PING"])
    return out


def _fuzz_frames(rng: random.Random, n: int) -> list[str | bytes]:
    valid = _valid_messages()
    frames: list[str | bytes] = []
    for i in range(n):
        kind = i % 4
        if kind == 0:
            frames.append(bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64))))
        elif kind == 1:
            frames.append("".join(rng.choice(string.printable) for _ in range(rng.randint(0, 80))))
        elif kind == 2:
            frames.append(json.dumps(_random_value(rng)))
        else:
            frames.append(json.dumps(_mutate(rng, rng.choice(valid))))
    return frames


async def test_fuzz_then_a_real_session_still_works(server, tmp_path: Path) -> None:
    rng = random.Random(SEED)
    random.seed(SEED)  # the ping markers
    client = await ProtocolClient.connect(server.ws_url, TOKEN)
    codes: dict[str, int] = {}
    valid = 0
    for frame in _fuzz_frames(rng, FUZZ_FRAMES):
        replies = await _reply(client, frame)
        errors = [r for r in replies if isinstance(r, p.Error)]
        assert len(errors) <= 1, replies
        for error in errors:
            assert error.code in {c.value for c in ErrorCode}
            assert error.code != ErrorCode.INTERNAL, (frame, error)
            codes[error.code] = codes.get(error.code, 0) + 1
        valid += not errors
    assert codes.get("bad_json", 0) > 100 and codes.get("binary_frame", 0) > 300
    assert codes.get("invalid_message", 0) + codes.get("unknown_type", 0) > 100
    assert valid > 0  # some mutations stay valid (e.g. a ping with a new id)
    # The same connection, and a fresh one, still run a real session to the end.
    for c in (client, await ProtocolClient.connect(server.ws_url, TOKEN)):
        info = await c.create_session(mode="autonomous")
        server.services.backend.outputs.append(
            json.dumps({"thought": "t", "tool": "finish", "args": {"message": "all good"}})
        )
        log = await c.run_turn(info.session_id, "are you ok?", workspace=LocalWorkspace(tmp_path))
        assert (log.done.status, log.done.message) == ("finished", "all good")
        await c.close()
