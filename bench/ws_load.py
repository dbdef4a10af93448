"""WebSocket load: many concurrent agent sessions against a real uvicorn server on loopback.

    .venv/bin/python bench/ws_load.py [--sessions 100] [--turns 3] [--database-url URL]

The server runs in a child process (the real app, `create_app`, in uvicorn) with a scripted
model that answers instantly, so what is measured is the server: protocol, session manager,
agent loop and database writes. Each turn is read_file -> edit (proposed, accepted) ->
finish: 3 model calls, 3 tool requests answered by the client, 1 suggestion and 1 outcome
written. Prints JSON: turns/s, per-turn latency, the server-added part of it (turn time minus
the client's own time answering tool requests and reviewing; the model takes ~0), and the
server's peak RSS (VmHWM). Database: a fresh SQLite file unless --database-url names one
(e.g. a migrated PostgreSQL). Never part of the test run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TOKEN = "bench-token-0123456789abcdef"


def _act(tool: str, **args: str) -> str:
    return json.dumps({"thought": "bench", "tool": tool, "args": args})


def policy(messages: list[dict]) -> str:
    """The scripted agent: read a.py, flip x between 1 and 2, finish."""
    last = str(messages[-1].get("content") or "")
    if "was applied" in last:
        return _act("finish", message="flipped")
    if last.startswith("x = "):
        old = last.strip()
        new = "x = 2" if old == "x = 1" else "x = 1"
        return _act("edit", path="a.py", search=old, replace=new)
    return _act("read_file", path="a.py")


def serve(port: int, home: str, database_url: str, replies: int) -> None:
    """The child process: the real app on a scripted model."""
    import uvicorn

    from agent_server.agent.scripted import ScriptedModel
    from agent_server.api.config import UVICORN_WS_MAX_SIZE, ApiConfig
    from agent_server.api.main import create_app
    from ground.settings import Settings

    settings = Settings(home=Path(home), database_url=database_url, token=TOKEN,
                        log_level="WARNING")  # fmt: skip
    model = ScriptedModel([policy] * replies, context_window=65536)
    # Every session shares one token here: per-token limits off (they guard a real server
    # from one person's runaway client; this measures the server's own capacity).
    limits_off = ApiConfig(max_connections_per_token=1_000_000, messages_per_s=1e9,
                           message_burst=10**9)  # fmt: skip
    app = create_app(settings, backend=model, config=limits_off)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning",
                ws_max_size=UVICORN_WS_MAX_SIZE, ws_per_message_deflate=False)  # fmt: skip


async def one_session(url: str, root: Path, turns: int) -> list[tuple[float, float]]:
    """(turn seconds, client seconds within it) for each turn of one session."""
    from agent_server.agent.client_workspace import answer_request
    from agent_server.agent.workspace import LocalWorkspace
    from agent_server.protocol import messages as p
    from agent_server.protocol.client import Decision, ProtocolClient, tool_result_message

    root.mkdir(parents=True)
    (root / "a.py").write_text("x = 1\n")
    workspace = LocalWorkspace(root)
    client = await ProtocolClient.connect(url, TOKEN, client="ws-load")
    info = await client.create_session()
    results = []
    for i in range(turns):
        client_s = 0.0

        async def timed_answer(ws, method, params):  # counts the client's own work
            nonlocal client_s
            t = time.perf_counter()
            reply = await answer_request(ws, method, params)
            client_s += time.perf_counter() - t
            return reply

        started = time.perf_counter()
        await client.send(p.UserMessage(id=f"t{i}", session_id=info.session_id, text="flip x"))
        while True:
            m = await client.recv()
            if isinstance(m, p.ToolRequest):
                reply = await timed_answer(workspace, m.method, m.params)
                await client.send(tool_result_message(m.request_id, reply))
            elif isinstance(m, p.EditProposed):
                await client.send(p.EditOutcome(suggestion_id=m.suggestion_id,
                                                outcome=Decision().outcome,  # type: ignore[arg-type]
                                                client_event_id=os.urandom(8).hex()))  # fmt: skip
            elif isinstance(m, p.TurnDone):
                if m.status != "finished":
                    raise RuntimeError(f"turn ended {m.status}: {m.message}")
                break
            elif isinstance(m, p.Error):
                raise RuntimeError(f"{m.code}: {m.message}")
        results.append((time.perf_counter() - started, client_s))
    await client.close()
    return results


def peak_rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"VmHWM:\s+(\d+) kB", status)
    return int(match.group(1)) / 1024 if match else float("nan")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(args: argparse.Namespace) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="ws-load-"))
    database_url = args.database_url or f"sqlite:///{tmp / 'bench.db'}"
    from feedback.migrate import upgrade

    upgrade(database_url)
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port), "--home", str(tmp / "home"),
         "--database-url", database_url,
         "--turns", str(args.sessions * args.turns)],  # the child sizes its script by it
        cwd=REPO,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).raise_for_status()
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline or child.poll() is not None:
                    raise RuntimeError("the server did not start") from None
                await asyncio.sleep(0.2)
        rss_idle = peak_rss_mb(child.pid)
        url = f"ws://127.0.0.1:{port}/v1/ws"
        started = time.perf_counter()
        sessions = [one_session(url, tmp / f"ws{i}", args.turns) for i in range(args.sessions)]
        per_session = await asyncio.wait_for(asyncio.gather(*sessions), args.timeout)
        wall = time.perf_counter() - started
        rss_peak = peak_rss_mb(child.pid)
    finally:
        child.terminate()
        child.wait(30)
    turns = [t for s in per_session for t in s]
    total = [t for t, _ in turns]
    added = [t - c for t, c in turns]
    return {
        "sessions": args.sessions,
        "turns": len(turns),
        "database": "postgresql" if database_url.startswith("postgresql") else "sqlite",
        "wall_s": round(wall, 2),
        "turns_per_s": round(len(turns) / wall, 1),
        "turn_ms": {"p50": round(1000 * pct(total, 0.5), 1),
                    "p99": round(1000 * pct(total, 0.99), 1),
                    "mean": round(1000 * statistics.mean(total), 1)},
        "server_added_ms": {"p50": round(1000 * pct(added, 0.5), 1),
                            "p99": round(1000 * pct(added, 0.99), 1)},
        "server_rss_mb": {"idle": round(rss_idle, 1), "peak": round(rss_peak, 1)},
        "per_turn": "3 model calls, 3 tool requests, 1 suggestion + 1 outcome, ~14 events",
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--turns", type=int, default=3, help="turns per session")
    parser.add_argument("--timeout", type=float, default=600, help="bound on the whole run (s)")
    parser.add_argument("--database-url", default="", help="default: a fresh SQLite file")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--home", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.home, args.database_url, replies=4 * args.turns)
        return
    print(json.dumps(asyncio.run(run(args)), indent=2))


if __name__ == "__main__":
    main()
