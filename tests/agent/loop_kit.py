"""What the agent-loop tests share: a scripted action writer, a scripted person, an agent.

    model = ScriptedModel([act("read_file", path="a.py"), FINISH])
    a, sink = agent(model, root, mode="interactive", reviewer=lambda s: Person(s, [accept]))

Nothing to run; tests/agent/test_loop*.py use it (the `root` fixture is in conftest.py).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from agent_server.agent.config import AgentConfig
from agent_server.agent.events import EditDecision, EditProposal, InMemorySink
from agent_server.agent.loop import Agent
from agent_server.agent.scripted import ScriptedModel
from agent_server.agent.tools import CommandDecision
from agent_server.agent.workspace import LocalWorkspace
from agent_server.models.base import Completion, ToolCall, Usage


def act(tool: str, thought: str = "", plan: str | None = None, **args: str) -> str:
    action: dict[str, Any] = {"thought": thought, "tool": tool, "args": args}
    if plan is not None:
        action["plan"] = plan
    return json.dumps(action)


FINISH = act("finish", message="done")


class Person:
    """A scripted reviewer that logs into the sink's log, so ordering can be asserted."""

    def __init__(self, sink: InMemorySink, edits=(), commands=(), wait: bool = False) -> None:
        self.sink, self.edits, self.commands, self.wait = sink, list(edits), list(commands), wait
        self.proposals: list[EditProposal] = []
        self.asked: list[str] = []

    async def review_edit(self, proposal: EditProposal) -> EditDecision:
        self.sink.log.append(("review", proposal.id))
        self.proposals.append(proposal)
        if self.wait:
            await asyncio.Event().wait()  # a person who never answers
        return self.edits.pop(0)

    async def approve_command(self, command: str) -> bool | CommandDecision:
        self.asked.append(command)
        return self.commands.pop(0)


def agent(model: ScriptedModel, root: Path, **kw: Any) -> tuple[Agent, InMemorySink]:
    sink = InMemorySink()
    reviewer = kw.pop("reviewer", None)
    if callable(reviewer):
        reviewer = reviewer(sink)
    cfg = AgentConfig(**{"mode": "autonomous", **kw})
    return Agent(model, LocalWorkspace(root), cfg, sink=sink, reviewer=reviewer), sink


def last_user(model: ScriptedModel, call: int) -> str:
    return model.calls[call].messages[-1]["content"]


def reply(text: str, finish: str = "stop", calls: list[ToolCall] | None = None) -> Completion:
    return Completion(text, [1], [-0.1], finish, Usage(1, 1), "m", None, tool_calls=calls or [])
