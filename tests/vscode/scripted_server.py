"""A real agent server whose model is scripted, for the VS Code extension's tests.

    python -m tests.vscode.scripted_server --database-url URL --home DIR [--script FILE]

It migrates the database to head, starts the real app (create_app: WebSocket protocol,
feedback recording, auth) in uvicorn on a free loopback port, and prints one JSON line on
stdout -- {"port", "http_url", "ws_url", "token"} -- once it is listening; SIGTERM stops it.

The model is a ScriptedModel: the extension's integration and end-to-end tests check that
the editor, the protocol and the database fit together, which a scripted reply tests
deterministically (the dev model rarely writes an edit that applies). The real models are
tested in tests/models and tests/api/test_integration_vllm.py.

--script names a JSON file holding a list of agent actions (objects, sent as the model's
replies in order; strings are sent as they are). Without it the default script proposes two
edits -- `a.py` (x = 1 -> x = 2) and `b.py` (y = 1 -> y = 2) -- and then finishes.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
from pathlib import Path
from typing import Any

import uvicorn

from agent_server.agent.scripted import ScriptedModel
from agent_server.api.config import UVICORN_WS_MAX_SIZE
from agent_server.api.main import create_app
from apprentice.settings import Settings
from feedback.migrate import upgrade

DEFAULT_TOKEN = "vscode-test-token-0123456789"


def act(tool: str, **args: Any) -> dict[str, Any]:
    return {"thought": f"use {tool}", "tool": tool, "args": args}


DEFAULT_SCRIPT = [
    act("edit", path="a.py", search="x = 1", replace="x = 2"),
    act("edit", path="b.py", search="y = 1", replace="y = 2"),
    act("finish", message="Done: a.py sets x = 2."),
]


def load_script(path: str | None) -> list[str]:
    actions = DEFAULT_SCRIPT if path is None else json.loads(Path(path).read_text())
    if not isinstance(actions, list) or not actions:
        raise SystemExit(f"{path}: a script is a non-empty JSON list of actions")
    # Repeat the last action so that extra model calls (a retry, a rejected edit's follow-up)
    # finish the turn instead of exhausting the script.
    replies = [a if isinstance(a, str) else json.dumps(a) for a in actions]
    return replies + [replies[-1]] * 8


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True, help="SQLAlchemy URL (migrated here)")
    parser.add_argument("--home", required=True, help="APPRENTICE_HOME for this server")
    parser.add_argument("--token", default=DEFAULT_TOKEN)
    parser.add_argument("--script", help="JSON file: the list of agent actions")
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    args = parser.parse_args(argv)

    upgrade(args.database_url)
    settings = Settings(home=Path(args.home), database_url=args.database_url, token=args.token)
    app = create_app(settings, backend=ScriptedModel(load_script(args.script)))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, log_level="warning", ws_max_size=UVICORN_WS_MAX_SIZE, lifespan="on",
        ws_per_message_deflate=False,
    )  # fmt: skip
    server = uvicorn.Server(config)

    ready = {
        "port": port,
        "http_url": f"http://127.0.0.1:{port}",
        "ws_url": f"ws://127.0.0.1:{port}/v1/ws",
        "token": args.token,
    }
    original_startup = server.startup

    async def startup(sockets: Any = None) -> None:
        await original_startup(sockets=sockets)
        print(json.dumps(ready), flush=True)

    server.startup = startup  # type: ignore[method-assign]
    server.run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())
