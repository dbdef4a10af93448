"""Outcome ingest under load: `bench/ingest.py [--clients 16] [--outcomes N] [--database-url URL]`
prints JSON.

What it measures: how fast the server stores `edit.outcome`s that many editors send at
once, against what PostgreSQL itself does with the same rows. Goal (issue 15): the
WebSocket path reaches at least half the raw rate at 16 clients.

How:
- A fresh PostgreSQL database migrated to head (dropped afterwards), unless --database-url
  names one (it must be at head already; nothing is dropped then).
- Suggestions are seeded first with feedback.queries' `record_suggestion` (inline
  completions with a 1,024-token prompt, as the LSP stores them): an outcome must name one.
- The server is the real app (`create_app`, uvicorn) in a CHILD PROCESS, so the clients'
  work does not share its GIL; a scripted model (the outcome path never calls it). The
  per-token connection and message limits are lifted: the clients stand for 16 people.
- ws (measured): `--clients` WebSocket connections (asyncio + `websockets`), each says hello,
  then sends its share of `edit.outcome`s, one in flight at a time like an editor, each with
  a new client_event_id and a suggestion of its own, and waits for the `outcome.ack`. Ack
  latency is send to ack received; outcomes/s is outcomes over the phase's wall time.
- raw (the baseline, same run): the same number of rows with the same columns
  `record_outcome` writes (INSERT ... ON CONFLICT (client_event_id) DO NOTHING RETURNING
  id), each in its own transaction, from `--clients` threads with a psycopg connection each.
- Both phases start once every client is connected and has stored `--warmup` outcomes (not
  counted): connection set-up and the server's first pool checkouts are not timed.

    .venv/bin/python bench/ingest.py --clients 16 --outcomes 3000 [--rounds 3]

On a shared machine compare only the ratio of one run; `--rounds` alternates the phases and
reports the median of each. Never part of the test run.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import ExitStack
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TOKEN = "bench-token-0123456789abcdef"
GOAL_RATIO, GOAL_CLIENTS = 0.5, 16
PROMPT_TOKENS = 1024  # a typical inline-completion prompt: the suggestion row is not tiny
OUTCOME = "accepted"


def log(message: str) -> None:
    print(f"[ingest] {message}", file=sys.stderr, flush=True)


def serve(port: int, home: str, database_url: str) -> None:
    """The child process: the real app in uvicorn, one worker, as `apprentice serve` runs it."""
    import uvicorn

    from agent_server.agent.scripted import ScriptedModel
    from agent_server.api.config import UVICORN_WS_MAX_SIZE, ApiConfig
    from agent_server.api.main import create_app
    from ground.settings import Settings

    settings = Settings(home=Path(home), database_url=database_url, token=TOKEN,
                        log_level="WARNING")  # fmt: skip
    # All clients share the one token, which would cap them together at one person's message
    # rate (agent_server/api/limits.py): lifted, as the bench measures the server's capacity.
    lift = {"messages_per_s": 1e9, "message_burst": 10**9, "max_connections_per_token": 10**6}
    known = {k: v for k, v in lift.items() if k in ApiConfig.model_fields}
    config = ApiConfig.from_settings(settings).model_copy(update=known)
    app = create_app(settings, backend=ScriptedModel([]), config=config)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning",
                ws_max_size=UVICORN_WS_MAX_SIZE, ws_per_message_deflate=False)  # fmt: skip


def seed_suggestions(database_url: str, n: int) -> list[str]:
    """`n` stored inline-completion suggestions, their ids in order."""
    from feedback.db import make_engine, make_sessionmaker, transaction
    from feedback.queries.suggestions import record_suggestion

    engine = make_engine(database_url)
    ids = []
    try:
        with transaction(make_sessionmaker(engine)) as db:
            for i in range(n):
                row = record_suggestion(
                    db, kind="completion", model="bench", adapter_version=None,
                    prompt_messages=[{"role": "user", "content": f"complete a.py #{i}"}],
                    prompt_token_ids=list(range(PROMPT_TOKENS)),
                    completion_text="x = 1", completion_token_ids=[87, 284, 352],
                    completion_logprobs=[-0.1, -0.2, -0.3], proposed="x = 1",
                    file_path="a.py", latency_s=0.05,
                )  # fmt: skip
                ids.append(row.id)
    finally:
        engine.dispose()
    return ids


def figures(latencies: list[float], wall: float, rate: str, ms: str) -> dict[str, float]:
    ordered = sorted(latencies)

    def pct(q: float) -> float:
        return round(1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)

    return {rate: round(len(ordered) / wall, 1), f"{ms}_p50": pct(0.5),
            f"{ms}_p99": pct(0.99), "wall_s": round(wall, 2)}  # fmt: skip


def shares(items: list[str], clients: int) -> list[list[str]]:
    """Client i gets items i, i + clients, ...: equal shares, all distinct."""
    return [items[i::clients] for i in range(clients)]


# ---- ws: through the server ----------------------------------------------------------------


def outcome_frame(suggestion_id: str) -> str:
    # Plain JSON, not the pydantic models: the client process should cost as little as it
    # can, since it shares the machine's cores with the server and PostgreSQL.
    return json.dumps({
        "type": "edit.outcome", "id": uuid.uuid4().hex[:12], "suggestion_id": suggestion_id,
        "outcome": OUTCOME, "client_event_id": f"bench-ws-{uuid.uuid4().hex}",
        "client_time": dt.datetime.now(dt.UTC).isoformat(), "accepted_length": 5,
    })  # fmt: skip


async def ws_client(
    url: str, warmup: list[str], work: list[str], ready: asyncio.Barrier, go: asyncio.Event
) -> list[float]:
    from websockets.asyncio.client import connect

    from agent_server.protocol.messages import PROTOCOL_VERSION

    async def one(ws: object, suggestion_id: str) -> float:
        started = time.perf_counter()
        await ws.send(outcome_frame(suggestion_id))  # type: ignore[attr-defined]
        reply = json.loads(await ws.recv())  # type: ignore[attr-defined]
        elapsed = time.perf_counter() - started
        if reply.get("type") != "outcome.ack" or reply.get("duplicate"):
            raise RuntimeError(f"expected a new outcome.ack, got {reply}")
        return elapsed

    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with connect(url, additional_headers=headers, proxy=None, open_timeout=30) as ws:
        await ws.send(json.dumps({"type": "hello", "protocol_version": PROTOCOL_VERSION,
                                  "client": "bench-ingest"}))  # fmt: skip
        welcome = json.loads(await ws.recv())
        if welcome.get("type") != "welcome":
            raise RuntimeError(f"hello was answered with {welcome}")
        for suggestion_id in warmup:
            await one(ws, suggestion_id)
        await ready.wait()
        await go.wait()
        return [await one(ws, suggestion_id) for suggestion_id in work]


async def ws_phase(url: str, warmup: list[str], work: list[str], clients: int) -> dict:
    ready, go = asyncio.Barrier(clients + 1), asyncio.Event()
    tasks = [
        asyncio.create_task(ws_client(url, w, s, ready, go))
        for w, s in zip(shares(warmup, clients), shares(work, clients), strict=True)
    ]
    waiting = asyncio.create_task(ready.wait())
    await asyncio.wait([waiting, *tasks], return_when=asyncio.FIRST_COMPLETED)
    if not waiting.done():  # a client failed before the start line: say why
        await asyncio.gather(*tasks)
    started = time.perf_counter()
    go.set()
    latencies = [x for per_client in await asyncio.gather(*tasks) for x in per_client]
    return figures(latencies, time.perf_counter() - started, "outcomes_per_s", "ack_ms")


# ---- raw: psycopg straight into PostgreSQL -------------------------------------------------


def insert_sql() -> tuple[str, list[str]]:
    """The raw INSERT: every column of `outcomes` but the id, as record_outcome fills them
    (read from the model, so a column added later is in both), and its column names."""
    from feedback.models import Outcome

    table = Outcome.__table__.columns
    columns = [c.name for c in table if c.name != "id" and c.server_default is None]
    values = ", ".join(f"%({c})s" for c in columns)
    sql = (f"INSERT INTO outcomes ({', '.join(columns)}) VALUES ({values}) "
           "ON CONFLICT (client_event_id) DO NOTHING RETURNING id")  # fmt: skip
    return sql, columns


def raw_phase(conninfo: str, warmup: list[str], work: list[str], clients: int) -> dict:
    import psycopg

    sql, columns = insert_sql()
    ready = threading.Barrier(clients + 1)
    go = threading.Event()
    results: list[list[float]] = [[] for _ in range(clients)]
    errors: list[BaseException] = []

    def one(conn: psycopg.Connection, suggestion_id: str) -> float:
        started = time.perf_counter()
        now = dt.datetime.now(dt.UTC)  # server_time: record_outcome's Python-side default
        row = conn.execute(sql, dict.fromkeys(columns) | {
            "suggestion_id": suggestion_id, "kind": OUTCOME, "accepted_length": 5,
            "client_event_id": f"bench-raw-{uuid.uuid4().hex}", "client_time": now,
            "server_time": now}).fetchone()  # fmt: skip
        conn.commit()  # one transaction per row, as the server commits each outcome
        elapsed = time.perf_counter() - started
        if row is None:
            raise RuntimeError("the raw insert stored nothing")
        return elapsed

    def client(i: int, warm: list[str], mine: list[str]) -> None:
        try:
            with psycopg.connect(conninfo) as conn:
                for suggestion_id in warm:
                    one(conn, suggestion_id)
                ready.wait()
                go.wait()
                results[i] = [one(conn, suggestion_id) for suggestion_id in mine]
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
            ready.abort()

    pairs = enumerate(zip(shares(warmup, clients), shares(work, clients), strict=True))
    threads = [threading.Thread(target=client, args=(i, *pair), daemon=True) for i, pair in pairs]
    for thread in threads:
        thread.start()
    try:
        ready.wait()
    except threading.BrokenBarrierError:
        raise RuntimeError(f"a raw client failed: {errors[0]!r}") from errors[0]
    started = time.perf_counter()
    go.set()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    if errors:
        raise RuntimeError(f"a raw client failed: {errors[0]!r}") from errors[0]
    return figures([x for per_client in results for x in per_client], wall, "rows_per_s", "ms")


# ---- the run --------------------------------------------------------------------------------


def start_child(database_url: str, home: Path) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    child = subprocess.Popen([sys.executable, __file__, "--serve", str(port), "--home", str(home),
                              "--database-url", database_url], cwd=REPO)  # fmt: skip
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).raise_for_status()
            return child, f"ws://127.0.0.1:{port}/v1/ws"
        except httpx.HTTPError:
            if time.monotonic() > deadline or child.poll() is not None:
                child.kill()
                raise RuntimeError("the server did not start") from None
            time.sleep(0.2)


def measure(database_url: str, args: argparse.Namespace) -> dict:
    from sqlalchemy.engine import make_url

    n, clients, rounds = args.outcomes, args.clients, args.rounds
    warm = clients * args.warmup
    per_round = 2 * (n + warm)  # ws and raw each get suggestions of their own
    log(f"seeding {rounds * per_round} suggestions")
    ids = seed_suggestions(database_url, rounds * per_round)
    # psycopg's own URL: the driver suffix dropped, the password (if any) kept.
    conninfo = make_url(database_url).set(drivername="postgresql").render_as_string(False)
    runs: dict[str, list[dict]] = {"ws": [], "raw": []}
    with tempfile.TemporaryDirectory(prefix="ingest-") as home:
        child, url = start_child(database_url, Path(home))
        try:
            for r in range(rounds):
                mine = ids[r * per_round : (r + 1) * per_round]
                ws_ids, raw_ids = mine[: n + warm], mine[n + warm :]
                # Alternate which phase goes first, so neither always meets a warmer cache.
                for phase in ("ws", "raw") if r % 2 == 0 else ("raw", "ws"):
                    log(f"round {r + 1}/{rounds}: {phase}, {n} outcomes, {clients} clients")
                    if phase == "ws":
                        got = asyncio.run(ws_phase(url, ws_ids[:warm], ws_ids[warm:], clients))
                    else:
                        got = raw_phase(conninfo, raw_ids[:warm], raw_ids[warm:], clients)
                    runs[phase].append(got)
                    log(f"  {got}")
        finally:
            child.terminate()
            child.wait(30)
    return {  # the median of each figure over the rounds
        phase: {key: round(statistics.median(r[key] for r in got), 2) for key in got[0]}
        for phase, got in runs.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=GOAL_CLIENTS)
    parser.add_argument("--outcomes", type=int, default=3000, help="per phase and round")
    parser.add_argument("--warmup", type=int, default=3, help="uncounted outcomes per client")
    parser.add_argument("--rounds", type=int, default=1, help="ws/raw pairs; medians reported")
    parser.add_argument("--database-url", default="",
                        help="a PostgreSQL database at head (default: a fresh one)")  # fmt: skip
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--home", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.home, args.database_url)
        return
    if args.outcomes < args.clients:
        raise SystemExit("--outcomes must be at least --clients")
    with ExitStack() as stack:
        database_url = args.database_url
        if not database_url:
            from feedback.migrate import upgrade
            from tests.fixtures.databases import fresh_pg_database

            database_url = stack.enter_context(fresh_pg_database())
            log(f"fresh database {database_url.rsplit('/', 1)[1]}, migrating to head")
            upgrade(database_url)
        if not database_url.startswith("postgresql"):
            raise SystemExit("the raw baseline is psycopg: --database-url must be PostgreSQL")
        measured = measure(database_url, args)
    ratio = measured["ws"]["outcomes_per_s"] / measured["raw"]["rows_per_s"]
    result = {
        "clients": args.clients,
        "outcomes": args.outcomes,
        "rounds": args.rounds,
        "server": "child process: create_app in uvicorn, 1 worker",
        **measured,
        "ratio": round(ratio, 3),
        "goal": f"ratio >= {GOAL_RATIO} at {GOAL_CLIENTS} clients",
        "goal_met": ratio >= GOAL_RATIO if args.clients == GOAL_CLIENTS else None,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
