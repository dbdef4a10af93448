"""Hypothesis fuzzes the WebSocket protocol over real sockets: every frame is answered, nothing
crashes, and a well-formed client is served correctly afterwards on the same server.

A real server (uvicorn, a fresh PostgreSQL database, a scripted model that finishes every turn
and answers every completion) gets 1,500 generated frames from the `websockets` client: the
protocol's messages with hostile values (NUL, RTL and BOM marks, lone surrogates as JSON
escapes, huge strings, numbers beyond 64 bits, NaN), mutated (fields dropped, added, retyped,
`type` swapped for a server message's or junk, ids empty, numeric or too long), random JSON,
raw and truncated text, deep nesting, binary frames, frames over the size limit. Ids come from
pools with real ones (this connection's session, another's, a stored suggestion, a tool
request the server awaits) and unknown ones: outcomes and tool results for nothing pending,
resume of unknown or taken sessions, cancel without a turn. One frame in five goes to a fresh
connection that never said hello.

Each frame is followed by a `ping`: what arrives before the `pong` is the frame's answer.
Asserted: every server message validates against the protocol; every frame is answered as
the protocol's own parser says it should be (a reply echoing its id, or an `error` with the
id it could read; completions and turns by the end of the run); every `error` code is an
ErrorCode and none is `internal`; connections stay open, the server thread alive. Then a
well-formed client runs hello, session.create, completion.request, ping and a whole turn.

Run (prints the figures): .venv/bin/python -m pytest tests/api/test_fuzz_ws.py -q -s
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from websockets.sync.client import connect

from agent_server.agent.scripted import ScriptedModel
from agent_server.agent.workspace import LocalWorkspace
from agent_server.api.config import ApiConfig
from agent_server.protocol import messages as p
from agent_server.protocol.client import ProtocolClient
from agent_server.protocol.errors import ErrorCode
from tests.api.server import TOKEN

pytestmark = pytest.mark.postgres
EXAMPLES = 1500  # one frame each: in lists hypothesis repeats elements (1 in 4 distinct)
FINISH = json.dumps({"thought": "t", "tool": "finish", "args": {"message": "all good"}})
ASYNC = ("completion.request", "user.message", "cancel")  # answered later, or by turn.done
LIVE = "<live request>"  # in the pool: replaced, when sent, by a request the server awaits
NASTY = [
    "", " ", "\x00", "a\x00b", "\u202e", "abc\u202edef.py", "\u200f\u061c", "\ufeff", "\ud800",
    "\udfff", "\U0001f600", "e\u0301", "\u2028\u2029", "\x1b[31m", "../../etc/passwd", "%00",
    "\\u0000", "' OR 1=1 --", "null", "x" * 129, "x" * 5000, "\u0000" * 3, "\uffff", "\U0010ffff",
]  # fmt: skip
BIG = [600_000, 900_000]  # under the 1 MiB frame limit, over the fields' 512 KiB caps

texts = st.one_of(
    st.sampled_from(NASTY),
    st.text(st.characters(exclude_categories=()), max_size=24),  # surrogates included
)
# Field values: plain ones half the time, so that many messages are valid and reach handlers.
fields = st.one_of(st.sampled_from(["a.py", "hello", "src/app.py", "é☃ 名前"]), texts)
scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | texts
values = st.recursive(
    scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(texts, c, max_size=3), max_leaves=8
)
TYPES = [p.message_type(m) for m in p.CLIENT_MESSAGES]


@st.composite
def message(draw: Any, pools: dict[str, list[str]]) -> dict[str, Any]:
    """A client message of a random type, fields from the pools or hostile; often valid."""

    def pick(pool: str) -> Any:
        return draw(st.one_of(st.sampled_from(pools[pool]), st.sampled_from(pools[pool]), texts))

    def one(*choices: Any) -> Any:
        return draw(st.sampled_from(choices))

    kind = draw(st.sampled_from(TYPES))
    msg: dict[str, Any] = {"type": kind}
    if kind == "hello":
        msg.update(protocol_version=one(1, 1, 0, 2, -1, 2**64), client=draw(fields))
    elif kind == "session.create":
        msg.update(mode=one("interactive", "autonomous", "x"), title=draw(fields))
        msg.update(workspace=draw(fields))
    elif kind in ("session.resume", "cancel"):
        msg.update(session_id=pick("sessions"))
    elif kind == "user.message":
        diagnostic = {"line": draw(st.integers(-1, 2**40)), "message": draw(fields)}
        context = {"path": draw(fields), "diagnostics": [diagnostic]}
        msg.update(session_id=pick("sessions"), text=draw(fields), context=context)
    elif kind == "tool.result":
        msg.update(request_id=pick("requests"), result={"text": draw(fields)})
    elif kind == "completion.request":
        msg.update(path=draw(fields), prefix=draw(fields), suffix=draw(fields))
        msg.update(language=draw(fields), max_tokens=draw(st.integers(-5, 600)))
    elif kind == "edit.outcome":
        msg.update(suggestion_id=pick("suggestions"), client_event_id=pick("events"))
        msg.update(outcome=one("accepted", "rejected", "shown", "bogus"), reason=draw(fields))
        msg.update(final_text=draw(fields))
        times = ("2024-01-01T00:00:00Z", "0001-01-01T00:00:00", "x", "9999-12-31T23:59:59+14:00")
        msg.update(client_time=one(*times))
    elif kind == "command.approval.response":
        msg.update(request_id=pick("requests"), approved=draw(st.booleans()))
    return msg


@st.composite
def mutated(draw: Any, pools: dict[str, list[str]]) -> dict[str, Any]:
    msg = draw(message(pools))
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["drop", "add", "retype", "retag", "huge"]))
        keys = list(msg)
        if op in ("drop", "retype", "huge") and not keys:
            continue
        if op == "drop":
            msg.pop(draw(st.sampled_from(keys)))
        elif op == "add":
            key = draw(st.sampled_from(["zzz", "", "Type", "__proto__", "session_id"]) | texts)
            msg[key] = draw(values)
        elif op == "retype":
            msg[draw(st.sampled_from(keys))] = draw(values)
        elif op == "retag":
            tags = ["welcome", "error", "turn.done", "", "PING", "ping ", 5, None, []]
            msg["type"] = draw(st.sampled_from(tags))
        else:
            msg[draw(st.sampled_from(keys))] = "x" * draw(st.sampled_from(BIG))
    return msg


def frames(pools: dict[str, list[str]]) -> st.SearchStrategy[Any]:
    """("obj", message, id): JSON, the id ours (None: unique, set when sent) or hostile (left
    out, empty, too long, not a string); ("json", value); ("text", str); ("bytes", bytes)."""
    ids = st.sampled_from([None] * 6 + [("drop",), ("",), ("x" * 129,), (7,), ([],), ("\x00",)])
    obj = st.tuples(st.just("obj"), message(pools) | mutated(pools), ids)
    raw = st.one_of(
        st.text(st.characters(exclude_categories=("Cs",)), max_size=60),  # UTF-8 encodable
        st.sampled_from(["{", "[" * 5000 + "]" * 5000, '{"type": "ping"', "\x00", "\ufeff{}"]),
        st.builds(lambda n: '{"type":"ping","pad":"' + "x" * n + '"}', st.just(1_100_000)),
    )
    by_mode = {"obj": obj, "json": st.tuples(st.just("json"), values),
               "text": st.tuples(st.just("text"), raw),
               "bytes": st.tuples(st.just("bytes"), st.binary(max_size=64))}  # fmt: skip
    # Weighted by hand: one_of would give each mode the same share, messages need the most.
    modes = ["obj"] * 7 + ["json", "text", "bytes"]
    return st.sampled_from(modes).flatmap(lambda mode: by_mode[mode])


def expected_id(text: str) -> tuple[bool, str | None, str | None]:
    """(valid, the id the answer echoes, the type when valid): the protocol's own parser
    decides, as the server's does."""
    if len(text.encode()) > p.MAX_FRAME_BYTES:
        return False, None, None  # frame_too_large, refused unread
    try:
        msg = p.client_adapter.validate_json(text)
    except ValidationError as exc:
        obj = None if exc.errors()[0]["type"] == "json_invalid" else json.loads(text)
        found = obj.get("id") if isinstance(obj, dict) else None
        return False, found if isinstance(found, str) and 0 < len(found) <= 128 else None, None
    return True, msg.id, msg.type


class Fuzzer:
    """Sends frames on a connection, reads until each frame's ping comes back, keeps score."""

    def __init__(self, url: str, stack: contextlib.ExitStack) -> None:
        self.url, self.stack = url, stack
        self.sent, self.syncs, self.codes, self.kinds = 0, 0, Counter[str](), Counter[str]()
        self.frames = Counter[str]()  # what was sent: a message type (valid or not), or a mode
        self.distinct: set[int] = set()  # hashes of the frames: hypothesis repeats some
        self.pending: dict[str, tuple[Any, str]] = {}  # our id -> (connection, frame)
        self.cancels: dict[str, list[str]] = {}  # session -> pending cancel ids
        self.awaited: list[str] = []  # tool / approval requests the server sent, unanswered
        self.unanswered, self.internal = list[str](), list[str]()

    def open(self, *, hello: bool) -> Any:
        ws = self.stack.enter_context(
            connect(self.url, additional_headers={"Authorization": f"Bearer {TOKEN}"},
                    proxy=None, max_size=16 * 1024 * 1024, compression=None)
        )  # fmt: skip
        if hello:
            ws.send(p.encode(p.Hello(protocol_version=p.PROTOCOL_VERSION, client="fuzz")))
            assert isinstance(self.read(ws), p.Welcome)
        return ws

    def read(self, ws: Any) -> Any:
        message = p.server_adapter.validate_json(ws.recv(timeout=30))  # malformed: fails
        self.kinds[message.type] += 1
        if isinstance(message, p.Error):
            assert message.code in ErrorCode.__members__.values(), message
            self.codes[message.code] += 1
            if message.code == ErrorCode.INTERNAL:  # a handler or a spawned request failed
                self.internal.append(f"{message.id}: {message.message}")
        if message.id is not None:
            self.pending.pop(message.id, None)
        if isinstance(message, p.ToolRequest | p.CommandApprovalRequest):
            self.awaited.append(message.request_id)
        if isinstance(message, p.TurnDone):  # answers a cancel (also one as the turn ended)
            for cancel_id in self.cancels.pop(message.session_id, []):
                self.pending.pop(cancel_id, None)
            if message.status == "error":  # the server's own fault, not the agent's
                self.internal.append(f"turn.done error: {message.message[:200]}")
        return message

    def sync(self, ws: Any) -> list[Any]:
        """Ping, and return what arrived before the pong."""
        self.syncs, seen = self.syncs + 1, []
        marker = f"sync-{self.syncs}"
        ws.send(p.encode(p.Ping(id=marker)))
        while not isinstance(message := self.read(ws), p.Pong) or message.id != marker:
            seen.append(message)
        return seen

    def drain(self, ws: Any) -> None:
        """Wait for the async answers (completions, turns) still owed on `ws`."""
        for _ in range(400):
            if not any(conn is ws for conn, _ in self.pending.values()):
                return
            self.sync(ws)
            time.sleep(0.02)

    def encode(self, frame: tuple[Any, ...]) -> str | bytes:
        mode, payload = frame[0], frame[1]
        if mode == "json":
            return json.dumps(payload)
        if mode != "obj":
            return payload
        msg = dict(payload)
        if msg.get("request_id") == LIVE:
            msg["request_id"] = self.awaited[-1] if self.awaited else "req-0"
        if frame[2] is None:
            msg["id"] = f"f{self.sent}"
        elif frame[2] != ("drop",):
            msg["id"] = frame[2][0]
        data = json.dumps(msg, ensure_ascii=False)
        # ASCII-escaped where a lone surrogate cannot be sent as UTF-8.
        return json.dumps(msg) if any(0xD800 <= ord(c) <= 0xDFFF for c in data) else data

    def send(self, ws: Any, frame: tuple[Any, ...]) -> None:
        self.sent += 1
        data = self.encode(frame)
        valid, echo, kind = expected_id(data) if isinstance(data, str) else (False, None, None)
        shown = kind or (frame[1].get("type") if frame[0] == "obj" else frame[0])
        self.frames[f"{shown[:30] if isinstance(shown, str) else 'obj'}{'' if valid else '!'}"] += 1
        key = re.sub(r'"id": "f\d+"', "", data) if isinstance(data, str) else data
        self.distinct.add(hash(key))  # without our ids
        later = valid and kind in ASYNC  # answered by its work, or by the turn's end, later
        if valid and kind in ("tool.result", "command.approval.response"):
            request = json.loads(data)["request_id"]
            if request in self.awaited:  # a real answer: the turn goes on, nothing replies
                self.awaited.remove(request)
                echo, later = None, True
        if later and echo is not None and echo == f"f{self.sent}":
            self.pending[echo] = (ws, data[:300])
            if kind == "cancel":
                self.cancels.setdefault(json.loads(data)["session_id"], []).append(echo)
        ws.send(data)
        seen = self.sync(ws)
        # Anything else is answered before the ping: its reply echoes the id it could read.
        if not later and all(m.id != echo for m in seen):
            self.unanswered.append(repr(data[:300]))


@pytest.fixture
def server(api_settings, serve):
    backend = ScriptedModel([FINISH] * 20_000)  # every turn finishes, every completion has text
    # Thousands of frames a second: a per-token message rate (where the server has one) would
    # answer them with rate_limited. A tool request the fuzz leaves unanswered ends soon.
    raised = {"messages_per_s": 1e9, "message_burst": 10**9}
    extra = {k: v for k, v in raised.items() if k in ApiConfig.model_fields}
    config = ApiConfig.from_settings(api_settings, tool_timeout_s=1.0, **extra)
    return serve(api_settings, backend=backend, config=config)


@pytest.fixture
def fuzz(server):
    with contextlib.ExitStack() as stack:  # closes every connection the fuzz opened
        yield Fuzzer(server.ws_url, stack)


def test_fuzzed_frames_are_answered_and_nothing_breaks(server, fuzz, tmp_path) -> None:
    other = fuzz.open(hello=True)
    other.send(p.encode(p.SessionCreate(id="o")))
    taken = fuzz.read(other).session_id  # another connection's session
    ws = fuzz.open(hello=True)
    ws.send(p.encode(p.SessionCreate(id="s")))
    mine = fuzz.read(ws).session_id
    ws.send(p.encode(p.CompletionRequest(id="c", path="a.py", prefix="def f(")))
    suggestion = fuzz.read(ws).suggestion_id
    pools = {
        "sessions": [mine, taken, "00000000-0000-0000-0000-000000000000", "nope"],
        "requests": [LIVE, LIVE, "req-1", "req-999"],
        "suggestions": [suggestion, suggestion, "00000000-0000-0000-0000-000000000000"],
        "events": ["ev-1", "ev-2"],  # repeated: duplicates and conflicts
    }

    # derandomize: the same frames on every run (CI is reproducible); no .hypothesis/ database.
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(frame=frames(pools), fresh=st.integers(0, 4))
    def run(frame: Any, fresh: int) -> None:
        # One example in five speaks on a new connection that never said hello.
        conn = fuzz.open(hello=False) if fresh == 0 else ws
        fuzz.send(conn, frame)
        if conn is not ws:
            fuzz.drain(conn)
            conn.close()

    run()
    fuzz.drain(ws)
    print(
        f"\nws fuzz: {fuzz.sent} frames sent ({len(fuzz.distinct)} distinct); "
        f"errors by code {dict(fuzz.codes.most_common())}; "
        f"replies by type {dict(fuzz.kinds.most_common())}; "
        f"crashes={len(fuzz.internal) + (not server.thread.is_alive())}; "
        f"frames by kind (! = invalid) {dict(fuzz.frames.most_common())}"
    )
    assert fuzz.sent >= 1000
    assert fuzz.internal == [], fuzz.internal[:10]
    assert fuzz.unanswered == [], fuzz.unanswered[:10]
    assert fuzz.pending == {}, [frame for _, frame in fuzz.pending.values()][:10]
    assert server.thread.is_alive()
    # The fuzz reached the handlers, not only the parser.
    for code in ("bad_json", "binary_frame", "invalid_message", "unknown_type", "frame_too_large",
                 "hello_required", "session_not_found", "unknown_request"):  # fmt: skip
        assert fuzz.codes[code] > 0, code
    # Handlers replied, not only errors (turns vary with timing; the client below runs one).
    assert all(fuzz.kinds[k] > 0 for k in ("session.info", "completion.suggestion"))
    for conn in (ws, other):
        assert conn.ping().wait(5)  # still open after everything
        conn.close()
    asyncio.run(well_formed_client(server.ws_url, tmp_path))


async def well_formed_client(url: str, root) -> None:
    client = await ProtocolClient.connect(url, TOKEN)
    info = await client.create_session()
    await client.send(p.CompletionRequest(id="done", path="a.py", prefix="x = "))
    suggestion = await client.expect(p.CompletionSuggestion)
    assert suggestion.id == "done" and suggestion.suggestion_id
    await client.send(p.Ping(id="alive"))
    assert (await client.expect(p.Pong)).id == "alive"
    log = await client.run_turn(info.session_id, "are you ok?", workspace=LocalWorkspace(root))
    assert (log.done.status, log.done.message) == ("finished", "all good")
    await client.close()
