"""Durability across real process death: the agent server runs as a real OS process
(tests/api/process_server.py: `apprentice serve`'s settings, database preparation, uvicorn
config and signal handling; a scripted model), is SIGKILLed, and is started again as a new
process on the same database and port. On SQLite (the embedded default) and PostgreSQL.

- Outcomes: four editors ask for completions and report outcomes without waiting for their
  acks; the server is killed while they send, after 300+ acks. Every acknowledged
  `client_event_id` must be in the database, with the row its ack named. After the restart
  each outcome is sent again: those stored come back `duplicate: true` (also one whose ack
  was never read), the rest are stored now, and there is one row per `client_event_id`.
- Sessions: a session with a finished turn is open in an editor when the server is killed;
  on the new process `session.resume` returns its transcript and last_seq, and the next
  message continues it, the model shown the first turn.

Run: .venv/bin/python -m pytest tests/api/test_durability.py -q -rP   (-rP: the figures)
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import itertools
import json
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import make_url
from websockets.exceptions import ConnectionClosed

from agent_server.agent.workspace import LocalWorkspace
from agent_server.protocol import messages as p
from agent_server.protocol.client import ProtocolClient
from feedback.db import make_engine, make_sessionmaker
from feedback.models import AgentSession, Outcome, SessionEvent, Suggestion
from tests.api.process_server import ServerProcess, spawn_server

TOKEN = "durability-token-0123456789abcdef"
EDITORS = 4
MIN_ACKED = 300
KILL_AT = 330  # acks seen before the SIGKILL, which goes out right after an outcome is sent
OUTCOMES = ("shown", "accepted", "persisted")  # what an editor reports on a kept completion
STORM_TIMEOUT_S = 90
SIGKILLED = -signal.SIGKILL  # Popen's returncode for a process killed by SIGKILL

Spawn = Callable[..., ServerProcess]


@pytest.fixture
def spawn(tmp_path: Path, db_url: str) -> Iterator[Spawn]:
    """`spawn(script, port=0, calls_log=None)`: a server process on this test's database."""
    started: list[ServerProcess] = []

    def start(script: dict[str, Any], **kwargs: Any) -> ServerProcess:
        home = tmp_path / f"home-{len(started)}"  # a new process, nothing of the last one's
        server = spawn_server(home=home, database_url=db_url, token=TOKEN, script=script,
                              **kwargs)  # fmt: skip
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def _read(db_url: str, query: Any) -> list[Any]:
    engine = make_engine(db_url)  # a fresh engine: the database as a new process finds it
    try:
        with make_sessionmaker(engine)() as db:
            return list(db.execute(query))
    finally:
        engine.dispose()


def stored_outcomes(db_url: str) -> dict[str, tuple[str, str, int]]:
    """client_event_id -> (suggestion_id, kind, outcome id), read from the database."""
    rows = _read(db_url, select(Outcome.client_event_id, Outcome.suggestion_id, Outcome.kind,
                                Outcome.id))  # fmt: skip
    return {cid: (sid, kind, oid) for cid, sid, kind, oid in rows}


# ---- outcomes ----------------------------------------------------------------------------


class ServerGone(Exception):
    """The connection died while an editor waited for a reply."""


@dataclass
class Ledger:
    """What the editors sent and which acks they got; `kill` fires on the first send after
    KILL_AT acks are in, so an outcome is on its way in when the process dies."""

    kill: Callable[[], None]
    sent: dict[str, tuple[str, str]] = field(default_factory=dict)  # cid -> (suggestion, kind)
    acked: dict[str, p.OutcomeAck] = field(default_factory=dict)
    suggestions: set[str] = field(default_factory=set)
    unexpected: list[Any] = field(default_factory=list)
    killed: bool = False

    def ack(self, ack: p.OutcomeAck) -> None:
        self.acked[ack.client_event_id] = ack

    def just_sent(self) -> None:
        if len(self.acked) >= KILL_AT and not self.killed:
            self.killed = True
            self.kill()  # synchronously: this editor's outcome and the others' are in flight


def outcome(cid: str, suggestion_id: str, kind: str) -> p.EditOutcome:
    return p.EditOutcome(id=cid, suggestion_id=suggestion_id, outcome=kind,  # type: ignore[arg-type]
                         client_event_id=cid, client_time=dt.datetime.now(dt.UTC))  # fmt: skip


async def editor(url: str, n: int, ledger: Ledger) -> None:
    """One editor: a completion, then its outcomes sent without waiting for their acks (an
    editor does not block typing on them), again and again until the server dies."""
    client = await ProtocolClient.connect(url, TOKEN, client=f"editor-{n}")
    waiting: dict[str, asyncio.Future[str]] = {}

    async def read() -> None:
        try:
            while True:
                m = await client.recv()
                if isinstance(m, p.OutcomeAck):
                    ledger.ack(m)
                elif isinstance(m, p.CompletionSuggestion) and m.id in waiting:
                    waiting.pop(m.id).set_result(m.suggestion_id)
                else:
                    ledger.unexpected.append(m)
        except ConnectionClosed:
            for future in waiting.values():
                future.set_exception(ServerGone())

    reader = asyncio.create_task(read())
    try:
        for i in itertools.count():
            rid = f"complete-{n}-{i}"
            waiting[rid] = asyncio.get_running_loop().create_future()
            await client.send(p.CompletionRequest(id=rid, path=f"editor{n}.py",
                                                  prefix=f"def f{i}():\n    "))  # fmt: skip
            suggestion = await waiting[rid]
            ledger.suggestions.add(suggestion)
            for kind in OUTCOMES:
                cid = uuid.uuid4().hex
                ledger.sent[cid] = (suggestion, kind)  # sent as far as the editor knows
                await client.send(outcome(cid, suggestion, kind))
                ledger.just_sent()
    except (ConnectionClosed, ServerGone):
        return  # the server died: what was acked must be stored
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await reader
        with contextlib.suppress(Exception):
            await client.close()


async def wait_stored(db_url: str, cid: str, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while cid not in await asyncio.to_thread(stored_outcomes, db_url):
        assert time.monotonic() < deadline, f"outcome {cid} was never stored"
        await asyncio.sleep(0.05)


async def test_acked_outcomes_survive_sigkill_and_resends_are_duplicates(
    spawn: Spawn, db_url: str
) -> None:
    backend = make_url(db_url).get_backend_name()
    server = spawn({"inline": "return 1"})
    ledger = Ledger(kill=lambda: server.proc.send_signal(signal.SIGKILL))

    # An outcome whose ack is never read: committed, then the process dies -- to the editor
    # the same as an ack lost with the process (it cannot tell whether the row exists).
    lagging = await ProtocolClient.connect(server.ws_url, TOKEN, client="lagging")
    await lagging.send(p.CompletionRequest(id="lag", path="lag.py", prefix="x = "))
    lost_suggestion = (await lagging.expect(p.CompletionSuggestion)).suggestion_id
    lost = uuid.uuid4().hex
    ledger.sent[lost] = (lost_suggestion, "shown")
    await lagging.send(outcome(lost, lost_suggestion, "shown"))
    await wait_stored(db_url, lost)

    started = time.monotonic()
    editors = [editor(server.ws_url, n, ledger) for n in range(EDITORS)]
    await asyncio.wait_for(asyncio.gather(*editors), STORM_TIMEOUT_S)
    storm_s = time.monotonic() - started
    assert server.proc.wait(30) == SIGKILLED, server.log()
    with contextlib.suppress(Exception):
        await lagging.close()
    assert not ledger.unexpected, ledger.unexpected[:3]

    # The database as the dead process left it.
    stored = stored_outcomes(db_url)
    acked = ledger.acked
    assert len(acked) >= MIN_ACKED
    missing = sorted(set(acked) - set(stored))
    assert not missing, f"{len(missing)} acknowledged outcomes are not stored: {missing[:5]}"
    for cid, ack in acked.items():
        assert stored[cid] == (ack.suggestion_id, ledger.sent[cid][1], int(ack.outcome_id))
    assert set(stored) <= set(ledger.sent), "a stored outcome no editor sent"
    in_db = {sid for (sid,) in _read(db_url, select(Suggestion.id))}
    assert ledger.suggestions <= in_db, "a completion was shown that is not stored"
    unacked = set(ledger.sent) - set(acked)
    assert lost in unacked and lost in stored

    # A new process on the same database and port. Everything is sent again: what was stored
    # must come back as a duplicate of its row, the rest is stored now.
    restarted = spawn({"inline": "return 1"}, port=server.port)
    client = await ProtocolClient.connect(restarted.ws_url, TOKEN, client="resend")
    resent: dict[str, p.OutcomeAck] = {}
    for cid, (suggestion, kind) in ledger.sent.items():
        await client.send(outcome(cid, suggestion, kind))
        resent[cid] = await client.expect(p.OutcomeAck)
    await client.close()
    assert resent[lost].duplicate, "the outcome whose ack was lost was stored twice"
    for cid, ack in resent.items():
        assert ack.duplicate == (cid in stored), cid
        if cid in stored:
            assert int(ack.outcome_id) == stored[cid][2]
    after = stored_outcomes(db_url)
    assert set(after) == set(ledger.sent)
    rows = _read(db_url, select(func.count()).select_from(Outcome))[0][0]
    assert rows == len(ledger.sent), "more than one row for a client_event_id"
    print(
        f"[{backend}] {len(acked)} outcomes acked by {EDITORS} editors before SIGKILL "
        f"({storm_s:.1f} s); {len(set(acked) & set(stored))}/{len(acked)} found after restart; "
        f"{len(unacked)} sent without an ack read, {len(unacked & set(stored))} of them stored; "
        f"{len(resent)} resent, {sum(a.duplicate for a in resent.values())} duplicates"
    )


# ---- sessions ----------------------------------------------------------------------------

TASK = "Find the marker in this project and tell me what it is."  # names no file: read_file runs
FOLLOW_UP = "And what was the marker again?"
MARKER = "kestrel-7f3a"


def act(tool: str, **args: str) -> dict[str, Any]:
    return {"thought": f"use {tool}", "tool": tool, "args": args}


async def test_a_live_session_continues_after_sigkill_and_restart(
    spawn: Spawn, db_url: str, tmp_path: Path
) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "notes.py").write_text(f'MARKER = "{MARKER}"\n')
    workspace = LocalWorkspace(root)
    first = spawn({"agent": [act("read_file", path="notes.py"),
                             act("finish", message=f"the marker is {MARKER}")]})  # fmt: skip
    client = await ProtocolClient.connect(first.ws_url, TOKEN)
    sid = (await client.create_session(mode="interactive", title="durable")).session_id
    log = await client.run_turn(sid, TASK, workspace=workspace)
    assert (log.done.status, log.done.message) == ("finished", f"the marker is {MARKER}")

    # Killed with the session open in the editor: no release ran, the row still names the
    # dead connection as its owner.
    assert first.kill() == SIGKILLED
    with contextlib.suppress(Exception):
        await client.close()
    [(owner, status)] = _read(db_url, select(AgentSession.owner, AgentSession.status)
                              .where(AgentSession.id == sid))  # fmt: skip
    assert owner is not None and status == "active"
    seqs = [s for (s,) in _read(db_url, select(SessionEvent.seq)
                                .where(SessionEvent.session_id == sid))]  # fmt: skip
    last_seq = max(seqs)

    calls = tmp_path / "calls.jsonl"
    second = spawn({"agent": [act("finish", message=f"continued: {MARKER}")]},
                   port=first.port, calls_log=calls)  # fmt: skip
    client = await ProtocolClient.connect(second.ws_url, TOKEN)
    resumed = await client.resume(sid)
    assert (resumed.session_id, resumed.resumed, resumed.title) == (sid, True, "durable")
    assert resumed.last_seq == last_seq
    entries = [(e.kind, e.text) for e in resumed.transcript]
    assert entries[0] == ("task", TASK)
    assert ("tool_call", "read_file {'path': 'notes.py'}") in entries
    assert any(kind == "observation" and MARKER in text for kind, text in entries), entries
    assert entries[-1] == ("status", f"finished: the marker is {MARKER}")

    log = await client.run_turn(sid, FOLLOW_UP, workspace=workspace)
    assert (log.done.status, log.done.message) == ("finished", f"continued: {MARKER}")
    await client.close()
    # The new process's model saw the first turn -- the task and what read_file returned.
    agent_calls = [c for c in map(json.loads, calls.read_text().splitlines())
                   if c["kind"] == "agent"]  # fmt: skip
    prompt = json.dumps(agent_calls[0]["messages"])
    assert TASK in prompt and MARKER in prompt and FOLLOW_UP in prompt
    # The same session continued: one session row, its new events after the old ones.
    assert _read(db_url, select(func.count()).select_from(AgentSession))[0][0] == 1
    after = [s for (s,) in _read(db_url, select(SessionEvent.seq)
                                 .where(SessionEvent.session_id == sid))]  # fmt: skip
    new = sorted(set(after) - set(seqs))
    assert new and min(new) > last_seq and len(after) == len(set(after))
    print(
        f"[{make_url(db_url).get_backend_name()}] session resumed at last_seq {last_seq} with "
        f"{len(entries)} transcript entries; {len(new)} events added after restart"
    )
