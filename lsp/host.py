"""The `AgentHost` seam: where the language server's agent runs, and the types it trades.

Two implementations:
- `local.LocalHost` (the default): the agent, the model backend (from Settings) and the
  feedback database in this process, on the editor's root folder.
- `remote.RemoteHost` (`apprentice lsp --server ws://.../v1/ws`): a running agent server
  does the model calls and the recording; this process plays the editor's part of its
  WebSocket protocol (answering tool requests from the editor's buffers and the disk).

The LSP features only talk to this seam, so both modes behave the same to the editor.
`InlineRequest` / `InlineSuggestion` are the session layer's (agent_server/session/).
Nothing to run; tests/lsp/ drive both through the real server process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from agent_server.agent.events import EditDecision, EditProposal
from agent_server.agent.tools import CommandDecision
from agent_server.session.completion import InlineRequest, InlineSuggestion
from feedback.vocab import OutcomeKind
from lsp.overlay import EditorWorkspace


@dataclass(frozen=True)
class TurnResult:
    status: str  # finished | cancelled | limit | format_errors | model_error | error ...
    message: str  # the agent's final message, or why it stopped
    session_id: str | None
    steps: int


@dataclass(frozen=True)
class OutcomeRecord:
    suggestion_id: str
    kind: OutcomeKind  # shown, a decision (accepted...) or a follow-up (persisted...)
    event_id: str  # idempotency key: the same event twice stores one row
    accepted_length: int | None = None
    accepted_part: list[Any] | None = None
    reason: str | None = None
    final_text: str | None = None


class UnknownSuggestionError(LookupError):
    """An outcome named a suggestion the database does not have."""


class Editor(Protocol):
    """What one agent turn needs from the editor: its files and the person's decisions."""

    workspace: EditorWorkspace

    async def review_edit(self, proposal: EditProposal) -> EditDecision: ...

    async def approve_command(self, command: str) -> CommandDecision: ...

    async def on_step(self, text: str) -> None:
        """A short line for the progress report ("read_file src/a.py")."""
        ...


class AgentHost(Protocol):
    async def start(self) -> None:
        """Load the model, migrate or connect; idempotent and safe to call concurrently."""
        ...

    async def complete_inline(self, request: InlineRequest) -> InlineSuggestion: ...

    async def run_turn(
        self, task: str, editor: Editor, *, session_id: str | None, title: str
    ) -> TurnResult:
        """One agent turn; `session_id` continues that chat session, None starts one."""
        ...

    async def record_outcome(self, outcome: OutcomeRecord) -> None:
        """Stored before it returns; UnknownSuggestionError for an unknown suggestion id."""
        ...

    async def status(self) -> dict[str, Any]: ...

    async def aclose(self) -> None: ...


def step_line(tool: str, args: dict[str, Any]) -> str:
    """How one tool call reads in a progress report."""
    target = args.get("path") or args.get("query") or args.get("command") or ""
    return f"{tool} {str(target)[:80]}".strip()
