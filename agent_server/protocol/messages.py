"""The WebSocket protocol at /v1/ws: every message type, as pydantic models.

This module is the source of truth. `python -m agent_server.protocol.docs` regenerates
docs/protocol.md and docs/protocol.schema.json from it (tests/api/test_protocol_docs.py fails
when they are stale).

Frames are JSON text objects with a `type`. Any client message may carry an `id`; every
message the server sends in reply to it (including each message of a turn started by a
`user.message`) echoes that `id`. The client opens with `hello`; the server answers
`welcome`. Client messages are validated strictly: unknown fields, wrong types or frames
over MAX_FRAME_BYTES get an `error` message with a code from `errors.ErrorCode`; the
connection stays open.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

# The parts messages are built from; re-exported (`X as X`) so users import one module.
from agent_server.protocol.parts import _ID, _PATH, _TEXT
from agent_server.protocol.parts import Diagnostic as Diagnostic
from agent_server.protocol.parts import EditorContext as EditorContext
from agent_server.protocol.parts import Hunk as Hunk
from agent_server.protocol.parts import Position as Position
from agent_server.protocol.parts import Selection as Selection
from agent_server.protocol.parts import ToolError as ToolError
from agent_server.protocol.parts import TranscriptEntry as TranscriptEntry
from agent_server.protocol.parts import Usage as Usage

PROTOCOL_VERSION = 1
MAX_FRAME_BYTES = 1024 * 1024  # larger frames get an `error` (frame_too_large)


def _require_type(schema: dict[str, Any]) -> None:
    # `type` has a default so Python code can omit it, but on the wire it is required.
    schema["required"] = ["type", *[r for r in schema.get("required", []) if r != "type"]]


class _Message(BaseModel):
    model_config = ConfigDict(
        extra="forbid", strict=True, frozen=True, json_schema_extra=_require_type
    )

    id: str | None = Field(
        default=None,
        max_length=128,
        description="Optional; echoed in every reply to this message.",
    )


# ---- client -> server ----------------------------------------------------------------------


class Hello(_Message):
    """First message of a connection."""

    type: Literal["hello"] = "hello"
    protocol_version: int = Field(description=f"Must equal {PROTOCOL_VERSION}.")
    client: Annotated[str, Field(max_length=128)] = Field(
        default="", description="Client name/version, for the logs."
    )


class SessionCreate(_Message):
    """Start a session; the editor answers its tool requests (it owns the files)."""

    type: Literal["session.create"] = "session.create"
    mode: Literal["interactive", "autonomous"] = Field(
        default="interactive",
        description="interactive: edits and commands wait for the person's decision.",
    )
    title: Annotated[str, Field(max_length=256)] = ""
    workspace: Annotated[str, Field(max_length=4096)] = Field(
        default="", description="Name or root of the editor's workspace, for display."
    )


class SessionResume(_Message):
    """Continue a stored session (also after a server restart) on this connection."""

    type: Literal["session.resume"] = "session.resume"
    session_id: _ID


class UserMessage(_Message):
    """Start a turn: the agent works on `text` until it finishes, hits a limit or is cancelled."""

    type: Literal["user.message"] = "user.message"
    session_id: _ID
    text: Annotated[str, Field(min_length=1, max_length=512 * 1024)]
    context: EditorContext = Field(default_factory=EditorContext)


class ToolResult(_Message):
    """The editor's answer to a `tool.request`: `result` on success, `error` otherwise."""

    type: Literal["tool.result"] = "tool.result"
    request_id: _ID
    result: dict[str, Any] | None = None
    error: ToolError | None = None


class CompletionRequest(_Message):
    """Inline completion at the cursor: answered by one `completion.suggestion`."""

    type: Literal["completion.request"] = "completion.request"
    path: _PATH
    language: Annotated[str, Field(max_length=64)] = ""
    prefix: Annotated[str, Field(max_length=256 * 1024)]
    suffix: Annotated[str, Field(max_length=256 * 1024)] = ""
    session_id: _ID | None = None
    max_tokens: int = Field(default=64, ge=1, le=512)


OutcomeKind = Literal[
    "accepted",
    "rejected",
    "partially_accepted",
    "edited_after_accept",
    "reverted",
    "persisted",
    "shown",
]


class EditOutcome(_Message):
    """What the person did with a suggestion. Acknowledged after it is stored.

    The first accepted / rejected / partially_accepted outcome of an edit proposal is also the
    decision the waiting agent acts on. `client_event_id` makes the write idempotent.
    """

    type: Literal["edit.outcome"] = "edit.outcome"
    suggestion_id: _ID
    outcome: OutcomeKind
    client_event_id: _ID
    client_time: datetime | None = None
    reason: Annotated[str, Field(max_length=8192)] | None = Field(
        default=None,
        description="Why it was rejected (reaches the model). A reason starting with "
        "'[editor] ' means the editor answered for the person because it could not show the "
        "proposal; the learner does not train on it.",
    )
    accepted_hunks: list[Annotated[int, Field(ge=0)]] | None = Field(
        default=None, max_length=10000, description="For partially_accepted: Hunk.index values."
    )
    accepted_length: int | None = Field(default=None, ge=0, description="Accepted characters.")
    final_text: _TEXT | None = Field(default=None, description="Text after the person's edit.")


class CommandApprovalResponse(_Message):
    type: Literal["command.approval.response"] = "command.approval.response"
    request_id: _ID
    approved: bool
    reason: Annotated[str, Field(max_length=8192)] | None = None


class Cancel(_Message):
    """Stop the session's running turn; it ends with `turn.done` status cancelled."""

    type: Literal["cancel"] = "cancel"
    session_id: _ID


class Ping(_Message):
    type: Literal["ping"] = "ping"


# ---- server -> client ----------------------------------------------------------------------


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


CLIENT_MESSAGES: tuple[type[_Message], ...] = (
    Hello,
    SessionCreate,
    SessionResume,
    UserMessage,
    ToolResult,
    CompletionRequest,
    EditOutcome,
    CommandApprovalResponse,
    Cancel,
    Ping,
)
SERVER_MESSAGES: tuple[type[_Message], ...] = (
    Welcome,
    SessionInfo,
    AssistantDelta,
    AgentStep,
    ToolRequest,
    CompletionSuggestion,
    EditProposed,
    OutcomeAck,
    CommandApprovalRequest,
    SummaryMade,
    TurnDone,
    Error,
    Pong,
)

ClientMessage = Annotated[
    Hello
    | SessionCreate
    | SessionResume
    | UserMessage
    | ToolResult
    | CompletionRequest
    | EditOutcome
    | CommandApprovalResponse
    | Cancel
    | Ping,
    Field(discriminator="type"),
]
ServerMessage = Annotated[
    Welcome
    | SessionInfo
    | AssistantDelta
    | AgentStep
    | ToolRequest
    | CompletionSuggestion
    | EditProposed
    | OutcomeAck
    | CommandApprovalRequest
    | SummaryMade
    | TurnDone
    | Error
    | Pong,
    Field(discriminator="type"),
]
# The one union of every message, both directions (the JSON Schema documents this).
AnyMessage = Annotated[ClientMessage | ServerMessage, Field(discriminator="type")]

client_adapter: TypeAdapter[Any] = TypeAdapter(ClientMessage)
server_adapter: TypeAdapter[Any] = TypeAdapter(ServerMessage)
any_adapter: TypeAdapter[Any] = TypeAdapter(AnyMessage)


def message_type(model: type[_Message]) -> str:
    return str(model.model_fields["type"].default)


def encode(message: _Message) -> str:
    """JSON text of a message; None fields are left out to keep frames small."""
    return message.model_dump_json(exclude_none=True)
