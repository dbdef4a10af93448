"""The scripted model the language server loads in tests that need a particular edit.

Named by `APPRENTICE_LSP_TEST_BACKEND=tests.lsp.scripted_backend:build` (read only by
`python -m lsp`); the script is the JSON file at `APPRENTICE_LSP_TEST_SCRIPT`:

    {"completion": "text for every inline completion",
     "agent": ["<action JSON>", ...],          # agent steps in order; then `finish`
     "delay_s": 0.0}                            # before each reply (cancellation tests)

Inline-completion prompts (plain text, recorded as one message of role
agent_server/session/prompts.py's RAW_ROLE) get `completion`; every other call takes the
next agent reply. A `completion` of "" is what a real model says when it has nothing to
add: its end-of-text token alone (text "", one token id), not an empty token list.
Everything else is the real server: the agent loop, the tools, the recording, the protocol.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from agent_server.agent.scripted import ScriptedModel
from agent_server.models.base import Completion, Message, Usage
from agent_server.session.prompts import RAW_ROLE

FINISH = json.dumps({"thought": "done", "tool": "finish", "args": {"message": "Done."}})
END_OF_TEXT = 0  # the token a model with nothing to add samples (any id: they are only ids)


def action(tool: str, thought: str = "", **args: str) -> str:
    """One agent step as the model writes it."""
    return json.dumps({"thought": thought or tool, "tool": tool, "args": args})


def write_script(path: Path, **script: Any) -> Path:
    path.write_text(json.dumps(script))
    return path


def model(script: dict[str, Any]) -> ScriptedModel:
    """The scripted model for one script (also used in-process by the remote-mode tests)."""
    completion = str(script.get("completion", ""))
    agent = iter(list(script.get("agent", [])))

    def reply(messages: list[Message]) -> str | Completion:
        if messages and messages[0].get("role") == RAW_ROLE:
            return completion or nothing(messages)
        return next(agent, FINISH)

    def nothing(messages: list[Message]) -> Completion:
        prompt_ids = scripted.prompt_ids(messages)
        return Completion(text="", token_ids=[END_OF_TEXT], logprobs=[-0.01],
                          finish_reason="stop", usage=Usage(len(prompt_ids), 1),
                          model=scripted.model_name, adapter=None,
                          prompt_token_ids=prompt_ids)  # fmt: skip

    scripted = ScriptedModel(
        [reply] * 10_000,
        context_window=16_384,
        delay_s=float(script.get("delay_s", 0.0)),
        model_name="scripted-test-model",
    )
    return scripted


def build() -> ScriptedModel:
    return model(json.loads(Path(os.environ["APPRENTICE_LSP_TEST_SCRIPT"]).read_text()))
