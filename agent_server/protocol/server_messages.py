"""The WebSocket protocol's server -> client messages, as pydantic models.

Part of the protocol: agent_server/protocol/messages.py re-exports them beside the client's
messages (use `from agent_server.protocol import messages as p`), and lists them in
SERVER_MESSAGES, the order docs/protocol.md shows them in.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from agent_server.protocol.parts import (
    MAX_FRAME_BYTES,
    PROTOCOL_VERSION,
    Hunk,
    TranscriptEntry,
    Usage,
    _Message,
)


class Welcome(_Message):
    type: Literal["welcome"] = "welcome"
    protocol_version: int = PROTOCOL_VERSION
    server: str
    model: str
    adapter: str | None = None
    max_frame_bytes: int = MAX_FRAME_BYTES


class SessionInfo(_Message):
    type: Literal["session.info"] = "session.info"
    session_id: str
    mode: str
    title: str
    status: str
    created_at: datetime
    resumed: bool = False
    last_seq: int = Field(default=-1, description="Seq of the newest stored event.")
    transcript: list[TranscriptEntry] = Field(
        default_factory=list, description="On resume: the last summary and the turns after it."
    )


class AssistantDelta(_Message):
    """Streamed assistant text of the running turn."""

    type: Literal["assistant.delta"] = "assistant.delta"
    session_id: str
    text: str


class AgentStep(_Message):
    """The agent called a tool; for display (`observation` is shortened)."""

    type: Literal["agent.step"] = "agent.step"
    session_id: str
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    observation: str = ""


class ToolRequest(_Message):
    """The agent needs the editor's workspace; answer with `tool.result` (same request_id)."""

    type: Literal["tool.request"] = "tool.request"
    request_id: str
    session_id: str
    method: str = Field(description="read_file | list_dir | search | write_file | run_command.")
    params: dict[str, Any] = Field(default_factory=dict)


class CompletionSuggestion(_Message):
    type: Literal["completion.suggestion"] = "completion.suggestion"
    suggestion_id: str = Field(description="Use it in edit.outcome (shown/accepted/rejected).")
    text: str
    adapter: str | None = None


class EditProposed(_Message):
    """An edit waiting for the person: answer with edit.outcome for `suggestion_id`."""

    type: Literal["edit.proposed"] = "edit.proposed"
    session_id: str
    suggestion_id: str
    path: str
    diff: str = Field(description="Unified diff of the whole proposal.")
    hunks: list[Hunk]


class OutcomeAck(_Message):
    """Sent only after the outcome row is stored."""

    type: Literal["outcome.ack"] = "outcome.ack"
    suggestion_id: str
    client_event_id: str
    outcome_id: str
    duplicate: bool = Field(description="True when this client_event_id was already stored.")


class CommandApprovalRequest(_Message):
    type: Literal["command.approval.request"] = "command.approval.request"
    request_id: str
    session_id: str
    command: str


class SummaryMade(_Message):
    """The agent summarized its context to keep going past the context window."""

    type: Literal["summary.made"] = "summary.made"
    session_id: str
    summary: str
    tokens_before: int | None = None
    tokens_after: int | None = None


class TurnDone(_Message):
    type: Literal["turn.done"] = "turn.done"
    session_id: str
    status: str = Field(
        description="finished | step_limit | time_limit | too_many_errors | cancelled | "
        "model_error | context_overflow (the agent's RunStatus), or error (a server fault)."
    )
    message: str = Field(default="", description="The agent's final message or the reason.")
    usage: Usage = Field(default_factory=Usage)


class Error(_Message):
    type: Literal["error"] = "error"
    code: str = Field(description="One of errors.ErrorCode.")
    message: str
    session_id: str | None = None


class Pong(_Message):
    type: Literal["pong"] = "pong"
