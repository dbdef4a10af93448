"""`AgentConfig.action_schema`: the schema the model's action text is decoded under.

None sends every tool's schema (actions.action_schema()); a narrower one reaches the backend
as given, streamed or not, and an edit recorded under it carries the prompt ids the model
saw. Native tools or structured_actions=False send none.
Run: .venv/bin/python -m pytest tests/agent/test_action_schema_config.py -q
"""

from __future__ import annotations

import json
from pathlib import Path

from agent_server.agent.actions import action_schema
from agent_server.agent.config import AgentConfig
from agent_server.agent.events import InMemorySink
from agent_server.agent.loop import Agent
from agent_server.agent.scripted import ScriptedModel
from agent_server.agent.workspace import LocalWorkspace

EDIT_ONLY = {"type": "object", "properties": {"tool": {"const": "edit"}}, "required": ["tool"]}
EDIT = json.dumps({"thought": "t", "tool": "edit",
                   "args": {"path": "a.py", "search": "x = 1", "replace": "x = 2"}})  # fmt: skip
FINISH = json.dumps({"thought": "t", "tool": "finish", "args": {"message": "done"}})


def test_the_decoding_schema_follows_the_config() -> None:
    assert AgentConfig().decoding_schema() == action_schema()
    assert AgentConfig(action_schema=EDIT_ONLY).decoding_schema() == EDIT_ONLY
    assert AgentConfig(action_schema=EDIT_ONLY, native_tools=True).decoding_schema() is None
    assert AgentConfig(structured_actions=False).decoding_schema() is None


async def test_a_narrowed_schema_reaches_the_model_and_the_edit_keeps_its_prompt_ids(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    for streamed in (False, True):
        model, sink = ScriptedModel([EDIT, FINISH]), InMemorySink()
        config = AgentConfig(mode="autonomous", action_schema=EDIT_ONLY)

        async def on_text(text: str) -> None:
            return None

        agent = Agent(model, LocalWorkspace(tmp_path), config, sink=sink,
                      on_text=on_text if streamed else None)  # fmt: skip
        result = await agent.run("edit a.py")
        assert result.status == "finished", result
        assert [c.schema for c in model.calls] == [EDIT_ONLY, EDIT_ONLY]
        ((completion, proposal),) = sink.suggestions
        assert proposal.path == "a.py"
        assert completion.prompt_token_ids == model.prompt_ids(model.calls[0].messages)
        assert len(completion.prompt_token_ids) == model.calls[0].prompt_tokens
        (tmp_path / "a.py").write_text("x = 1\n")
