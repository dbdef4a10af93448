"""A real agent server whose model is scripted, for the VS Code extension's tests.

    python -m tests.vscode.scripted_server --database-url URL --home DIR [--script FILE]

It migrates the database to head, starts the real app (create_app: WebSocket protocol,
feedback recording, auth) in uvicorn on a free loopback port (tests/api/server.py), and
prints one JSON line on stdout -- {"port", "http_url", "ws_url", "token"} -- once it is
listening; SIGTERM stops it.

The model is a ScriptedModel: the extension's integration and end-to-end tests check that
the editor, the protocol and the database fit together, which a scripted reply tests
deterministically (the dev model rarely writes an edit that applies). The real models are
tested in tests/models and tests/api/test_integration_vllm.py.

--script names a JSON file holding a list of agent actions (objects, sent as the model's
replies in order; strings are sent as they are), or an object {"actions": [...],
"completions": [{"after": TEXT, "text": REPLY}, ...]}. Without it the default script proposes
two edits -- `a.py` (x = 1 -> x = 2) and `b.py` (y = 1 -> y = 2) -- and then finishes.

Inline completions never take the agent's replies (the editor asks for one at every pause in
typing, so their number is not known in advance): the model's reply to a completion prompt
is the `text` of the first "completions" entry whose `after` the prompt ends with, else "\n":
the model ends the line at once, which the server turns into an empty suggestion (nothing to
show; a reply of no tokens at all could not be stored).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from typing import Any

from agent_server.agent.scripted import DEFAULT_SAMPLING, ScriptedModel
from agent_server.models.base import Completion, Sampling
from feedback.migrate import upgrade
from ground.settings import Settings
from tests.api.server import start_server

DEFAULT_TOKEN = "vscode-test-token-0123456789"


def act(tool: str, **args: Any) -> dict[str, Any]:
    return {"thought": f"use {tool}", "tool": tool, "args": args}


DEFAULT_SCRIPT = [
    act("edit", path="a.py", search="x = 1", replace="x = 2"),
    act("edit", path="b.py", search="y = 1", replace="y = 2"),
    act("finish", message="Done: a.py sets x = 2."),
]


class ScriptedEditorModel(ScriptedModel):
    """The agent's replies in order; inline completions by what the prompt ends with."""

    def __init__(self, outputs: list[str], completions: list[dict[str, str]]) -> None:
        super().__init__(outputs)
        self.completions = completions

    async def complete_text(
        self, prompt: str, *, sampling: Sampling = DEFAULT_SAMPLING, adapter: str | None = None
    ) -> Completion:
        reply = next((c["text"] for c in self.completions if prompt.endswith(c["after"])), "\n")
        # A one-reply model of its own makes the tokens, logprobs and length cut alike.
        inline = ScriptedModel([reply], context_window=self.context_window,
                               model_name=self.model_name)  # fmt: skip
        return await inline.complete_text(prompt, sampling=sampling, adapter=adapter)


def load_script(path: str | None) -> tuple[list[str], list[dict[str, str]]]:
    """The agent's replies and the completion rules of a script file (see the docstring)."""
    script = DEFAULT_SCRIPT if path is None else json.loads(Path(path).read_text())
    actions, completions = script, []
    if isinstance(script, dict):
        actions, completions = script.get("actions"), script.get("completions", [])
    if not isinstance(actions, list) or not actions:
        raise SystemExit(f"{path}: a script needs a non-empty JSON list of actions")
    if not isinstance(completions, list) or not all(
        isinstance(c, dict) and isinstance(c.get("after"), str) and isinstance(c.get("text"), str)
        for c in completions
    ):
        raise SystemExit(f'{path}: "completions" is a list of {{"after": str, "text": str}}')
    # Repeat the last action so that extra model calls (a retry, a rejected edit's follow-up)
    # finish the turn instead of exhausting the script.
    replies = [a if isinstance(a, str) else json.dumps(a) for a in actions]
    return replies + [replies[-1]] * 8, completions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True, help="SQLAlchemy URL (migrated here)")
    parser.add_argument("--home", required=True, help="APPRENTICE_HOME for this server")
    parser.add_argument("--token", default=DEFAULT_TOKEN)
    parser.add_argument("--script", help="JSON file: the list of agent actions")
    args = parser.parse_args(argv)

    upgrade(args.database_url)
    settings = Settings(home=Path(args.home), database_url=args.database_url, token=args.token)
    replies, completions = load_script(args.script)
    server = start_server(settings, backend=ScriptedEditorModel(replies, completions))
    # uvicorn runs in a thread here, so it installs no signal handlers: SIGTERM stops it.
    signal.signal(signal.SIGTERM, lambda *_: setattr(server.server, "should_exit", True))
    ready = {
        "port": server.port,
        "http_url": server.http_url,
        "ws_url": server.ws_url,
        "token": args.token,
    }
    print(json.dumps(ready), flush=True)
    while server.thread.is_alive():
        server.thread.join(0.5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
