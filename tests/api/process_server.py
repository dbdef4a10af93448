"""The agent server as a real OS process, for tests that kill it (tests/api/test_durability.py).

    python -m tests.api.process_server --script FILE --ready FILE [--port P] [--calls-log FILE]

What `apprentice serve` does, in a process of its own: settings from the environment
(APPRENTICE_HOME, APPRENTICE_DATABASE_URL, APPRENTICE_TOKEN, ...), the database prepared by
apprentice/prepare.py (SQLite migrated, PostgreSQL refused unless at head), the real app
(create_app) in uvicorn in the main thread with `serve`'s own config (apprentice.run) and its
signal handling. Only the model differs: a ScriptedModel, so a test knows what the agent does
(the --script file: {"agent": [replies...], "inline": "text"}); inline completions answer
"inline" every time without using up the agent's replies. --calls-log appends each agent
model call's messages as one JSON line, written at once (a SIGKILL loses nothing), so the
test can see what the model was shown. Once listening it writes {"pid", "port"} to --ready.

From a test: `spawn_server(...)` starts one and waits for it; `ServerProcess.kill()` is a
SIGKILL. Output goes to a log file (a full pipe would stall the server), shown on failure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60


@dataclass
class ServerProcess:
    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/v1/ws"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> int:
        """SIGKILL: no shutdown code runs (no lifespan exit, no engine dispose, no flush)."""
        os.kill(self.proc.pid, signal.SIGKILL)
        return self.proc.wait(30)

    def stop(self) -> None:
        """For teardown: whatever is still running is killed."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


def spawn_server(
    *,
    home: Path,
    database_url: str,
    token: str,
    script: dict[str, Any],
    port: int = 0,
    calls_log: Path | None = None,
) -> ServerProcess:
    """Start `python -m tests.api.process_server` and return once it listens."""
    home.mkdir(parents=True, exist_ok=True)
    stamp = f"{time.monotonic_ns()}"
    script_file, ready = home / f"script-{stamp}.json", home / f"ready-{stamp}.json"
    script_file.write_text(json.dumps(script))
    log_path = home / f"server-{stamp}.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPRENTICE_")}
    env.update(APPRENTICE_HOME=str(home), APPRENTICE_DATABASE_URL=database_url,
               APPRENTICE_TOKEN=token, OMP_WAIT_POLICY="PASSIVE")  # fmt: skip
    args = [sys.executable, "-m", "tests.api.process_server", "--script", str(script_file),
            "--ready", str(ready), "--port", str(port)]  # fmt: skip
    if calls_log is not None:
        args += ["--calls-log", str(calls_log)]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    server = ServerProcess(proc, 0, log_path)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"the server process did not start ({proc.returncode}):\n"
                               f"{server.log()}")  # fmt: skip
        time.sleep(0.05)
    server.port = json.loads(ready.read_text())["port"]
    return server


# ---- the process itself ------------------------------------------------------------------


def _model(script: dict[str, Any], calls_log: Path | None) -> Any:
    from agent_server.agent.scripted import DEFAULT_SAMPLING, ScriptedModel
    from agent_server.models.base import Completion, Sampling, Usage

    inline = str(script.get("inline", "pass"))
    replies = [r if isinstance(r, str) else json.dumps(r) for r in script.get("agent", [])]

    class ProcessModel(ScriptedModel):
        def _reply(self, messages: Sequence[Any], *args: Any) -> Completion:
            reply = super()._reply(messages, *args)
            if calls_log is not None:  # one line per call, closed at once: survives SIGKILL
                call = self.calls[-1]
                with calls_log.open("a") as out:
                    out.write(json.dumps({"kind": call.kind, "messages": call.messages}) + "\n")
            return reply

        async def complete_text(
            self, prompt: str, *, sampling: Sampling = DEFAULT_SAMPLING, adapter: str | None = None
        ) -> Completion:
            ids = self._tokens(inline)
            prompt_ids = self.prompt_ids([{"role": "prompt", "content": prompt}])
            return Completion(
                text=inline, token_ids=ids, logprobs=[-0.1] * len(ids), finish_reason="stop",
                usage=Usage(len(prompt_ids), len(ids)), model=self.model_name,
                adapter=adapter or self.adapter, prompt_token_ids=prompt_ids,
            )  # fmt: skip

    return ProcessModel(replies)


async def _serve(server: Any, sock: socket.socket, ready: Path) -> None:
    async def announce() -> None:
        while not server.started:  # set once the lifespan (services, database) is up
            await asyncio.sleep(0.01)
        tmp = ready.with_suffix(".tmp")
        tmp.write_text(json.dumps({"pid": os.getpid(), "port": sock.getsockname()[1]}))
        tmp.replace(ready)  # atomic: the test never reads half a file

    task = asyncio.create_task(announce())
    try:
        await server.serve(sockets=[sock])
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def main(argv: list[str] | None = None) -> int:
    import uvicorn

    from agent_server.api.main import create_app
    from apprentice.prepare import prepare_database
    from apprentice.run import uvicorn_config
    from ground.settings import Settings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--script", required=True, type=Path)
    parser.add_argument("--ready", required=True, type=Path)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--calls-log", type=Path)
    args = parser.parse_args(argv)

    settings = Settings()  # the environment, as for `apprentice serve`
    settings.ensure_home()
    prepare_database(settings)
    app = create_app(settings, backend=_model(json.loads(args.script.read_text()), args.calls_log))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # The same port again right after a SIGKILL: a restarted server, where editors reconnect.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    config = uvicorn_config(app, settings, "127.0.0.1", sock.getsockname()[1])
    asyncio.run(_serve(uvicorn.Server(config), sock, args.ready))
    return 0


if __name__ == "__main__":
    sys.exit(main())
