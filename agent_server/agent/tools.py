"""The agent's tools on top of a `Workspace`, and the human-in-the-loop seam (`Reviewer`).

`Toolbox.execute(action, call, step)` runs one parsed action and returns a `ToolResult`
(the observation text, plus the text of files read or written so the loop can keep their
outlines). Model-fixable failures (WorkspaceError, EditError: a SEARCH that does not match,
with its did-you-mean hint) raise `ToolFailure`, which the loop reflects to the model;
`finish` raises `Submitted`.

Edits are proposals first: the new text is computed in memory by the workspace's edit plan
(`Workspace.plan_edit`, with the workspace's EditConfig: the same path as `apply_edit`), the
completion that produced it (with its prompt and sampling: the `ModelCall`) is recorded
with `sink.record_suggestion` BEFORE anyone sees it, then in interactive mode the
`Reviewer` decides (accept / reject with a reason that reaches the model / accept some
hunks) and only then the file is written; in autonomous mode it is written at once.
`run_command` needs `Reviewer.approve_command` in interactive mode; its output is capped
(head and tail kept) and it has a timeout.

Run its tests: .venv/bin/python -m pytest tests/agent/test_loop.py -q
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from agent_server.agent import prompts
from agent_server.agent.actions import Action
from agent_server.agent.edits import SearchReplace, apply_hunks, parse_search_replace, split_hunks
from agent_server.agent.events import EditDecision, EditProposal, EventSink
from agent_server.agent.exceptions import Submitted, ToolFailure
from agent_server.agent.summarizer import clip
from agent_server.agent.workspace import Workspace
from agent_server.agent.workspace_types import WorkspaceError
from agent_server.models.base import Completion, Message, Sampling


@dataclass(frozen=True)
class CommandDecision:
    approved: bool
    reason: str = ""  # for a refusal: reaches the model


@runtime_checkable
class Reviewer(Protocol):
    """The person, as the API (or a test) presents them to the loop."""

    async def review_edit(self, proposal: EditProposal) -> EditDecision: ...

    async def approve_command(self, command: str) -> bool | CommandDecision: ...


@dataclass(frozen=True)
class ToolConfig:
    mode: Literal["interactive", "autonomous"] = "interactive"
    """interactive: edits go to the Reviewer, commands need approval."""
    command_timeout_s: float = 60.0
    """Timeout of one run_command."""
    max_output_chars: int = 8000
    """Cap on one observation; head and tail are kept."""
    show_file_chars: int = 3000
    """An edited file up to this size is shown in the observation (AgentConfig's knob)."""

    def __post_init__(self) -> None:
        if self.command_timeout_s <= 0:
            raise ValueError(f"command_timeout_s must be > 0, got {self.command_timeout_s}")
        if self.max_output_chars < 200:
            raise ValueError(f"max_output_chars must be >= 200, got {self.max_output_chars}")


@dataclass(frozen=True)
class ToolResult:
    text: str  # the observation
    files: dict[str, str] = field(default_factory=dict)  # path -> text read or written
    refused: bool = False  # the person declined the command or rejected the edit
    changed: bool = False  # files may have changed (an edit applied, a command ran)


Emit = Callable[..., Awaitable[None]]


@dataclass(frozen=True)
class ModelCall:
    """The model call behind an action: an edit's suggestion row records all three."""

    completion: Completion
    prompt: list[Message]  # the messages the model was given, exactly
    sampling: Sampling


class Toolbox:
    def __init__(
        self,
        workspace: Workspace,
        config: ToolConfig,
        reviewer: Reviewer | None,
        sink: EventSink,
        emit: Emit,
    ) -> None:
        if config.mode == "interactive" and reviewer is None:
            raise ValueError("interactive mode needs a reviewer (or use mode='autonomous')")
        self.ws, self.config, self.reviewer, self.sink, self.emit = (
            workspace, config, reviewer, sink, emit,
        )  # fmt: skip

    async def execute(self, action: Action, call: ModelCall, step: int) -> ToolResult:
        handler = getattr(self, f"_{action.tool}")
        try:
            return await handler(action, call, step)
        except WorkspaceError as e:  # EditError included
            raise ToolFailure(f"{action.tool} failed ({e.code}): {e.message}") from e

    def _clip(self, text: str) -> str:
        return clip(text, self.config.max_output_chars)

    async def _read_file(self, a: Action, call: ModelCall, step: int) -> ToolResult:
        text = await self.ws.read_file(a.args["path"])
        return ToolResult(self._clip(text) or "(empty file)", {a.args["path"]: text})

    async def _list_dir(self, a: Action, call: ModelCall, step: int) -> ToolResult:
        listing = await self.ws.list_dir(a.args.get("path") or ".")
        lines = [e.path + ("/" if e.kind == "dir" else "") for e in listing.entries]
        if listing.truncated:
            lines.append("[listing truncated: list a subdirectory for the rest]")
        return ToolResult(self._clip("\n".join(lines) or "(empty directory)"))

    async def _search(self, a: Action, call: ModelCall, step: int) -> ToolResult:
        result = await self.ws.search(a.args["query"], path=a.args.get("path") or ".")
        lines = [f"{m.path}:{m.line}: {m.text}" for m in result.matches]
        if result.truncated:
            lines.append("[more matches not shown: narrow the query or the path]")
        return ToolResult(self._clip("\n".join(lines) or "(no matches)"))

    async def _run_command(self, a: Action, call: ModelCall, step: int) -> ToolResult:
        command = a.args["command"]
        if self.config.mode == "interactive":
            assert self.reviewer is not None
            decision = await self.reviewer.approve_command(command)
            if isinstance(decision, bool):
                decision = CommandDecision(decision)
            await self.emit(
                "command_approval",
                command=command,
                approved=decision.approved,
                reason=decision.reason,
            )
            if not decision.approved:
                reason = f" Their reason: {decision.reason}" if decision.reason else ""
                return ToolResult(prompts.COMMAND_DECLINED + reason, refused=True)
        r = await self.ws.run_command(
            command,
            shell=True,  # the model writes command lines (pipes, &&), as a person would
            timeout_s=self.config.command_timeout_s,
            output_cap_bytes=self.config.max_output_chars,
        )
        head = f"exit code: {r.exit_code}"
        if r.timed_out:
            head = f"timed out after {self.config.command_timeout_s}s (killed)"
        return ToolResult(f"{head}\n{self._clip(r.output)}", changed=True)

    async def _finish(self, a: Action, call: ModelCall, step: int) -> ToolResult:
        raise Submitted(a.args["message"])

    async def _edit(self, a: Action, call: ModelCall, step: int) -> ToolResult:
        path = a.args["path"]
        if "blocks" in a.args:
            blocks = parse_search_replace(a.args["blocks"])
        else:
            blocks = [SearchReplace(a.args["search"], a.args["replace"])]
        # The workspace's edit plan, with its EditConfig (apply_edit's own path, less the
        # write). EditError / FileNotFound: nothing changes, the hint goes back to the model.
        plan = await self.ws.plan_edit(path, blocks)
        before, after = plan.old_text, plan.new_text
        if after == before:
            raise ToolFailure(f"The edit leaves {path} unchanged; SEARCH and REPLACE are equal.")
        proposal = EditProposal(
            id=uuid.uuid4().hex,
            step=step,
            path=path,
            before=before,
            after=after,
            diff=plan.diff,
            hunks=split_hunks(before, after),
            thought=a.thought,
        )
        # Recorded before the person sees it: an outcome must always find its suggestion.
        await self.sink.record_suggestion(
            call.completion, proposal, prompt=call.prompt, sampling=call.sampling
        )
        await self.emit("edit_proposed", proposal=proposal.to_dict())
        if self.config.mode == "autonomous":
            decision = EditDecision.accept()
        else:
            assert self.reviewer is not None
            decision = await self.reviewer.review_edit(proposal)
        await self.emit("edit_decision", proposal_id=proposal.id, decision=decision.to_dict())
        if decision.verdict == "rejected":
            return ToolResult(prompts.rejected_edit(path, decision.reason), refused=True)
        text = after
        if decision.verdict == "partially_accepted":
            text = apply_hunks(before, after, decision.hunks)
        await self.ws.write_file(path, text)
        if decision.verdict == "partially_accepted":
            partial = prompts.partial_edit(path, decision.hunks, len(proposal.hunks))
            return ToolResult(partial, {path: text}, changed=True)
        applied = prompts.edit_applied(path, text, self.config.show_file_chars)
        return ToolResult(applied, {path: text}, changed=True)
