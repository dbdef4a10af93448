"""The WebSocket protocol at /v1/ws: every message type, as pydantic models.

Defined here: the client's messages and the catalogue (CLIENT_MESSAGES, SERVER_MESSAGES, the
unions and their validating adapters, `encode`). The server's messages live in
server_messages.py and the shared objects in parts.py; both are re-exported, so
`from agent_server.protocol import messages as p` reaches every name. The outcome kinds an
editor may send are feedback.vocab's EditorOutcomeKind.

This package is the source of truth. `python -m agent_server.protocol.docs` regenerates
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

from pydantic import Field, TypeAdapter

# The parts messages are built from and the server's messages; re-exported (`X as X`) so
# users import one module.
from agent_server.protocol.parts import _ID, _NO_NUL, _PATH, _TEXT, _Message
from agent_server.protocol.parts import MAX_FRAME_BYTES as MAX_FRAME_BYTES
from agent_server.protocol.parts import PROTOCOL_VERSION as PROTOCOL_VERSION
from agent_server.protocol.parts import Diagnostic as Diagnostic
from agent_server.protocol.parts import EditorContext as EditorContext
from agent_server.protocol.parts import Hunk as Hunk
from agent_server.protocol.parts import Position as Position
from agent_server.protocol.parts import Selection as Selection
from agent_server.protocol.parts import ToolError as ToolError
from agent_server.protocol.parts import TranscriptEntry as TranscriptEntry
from agent_server.protocol.parts import Usage as Usage
from agent_server.protocol.server_messages import AgentStep as AgentStep
from agent_server.protocol.server_messages import AssistantDelta as AssistantDelta
from agent_server.protocol.server_messages import CommandApprovalRequest as CommandApprovalRequest
from agent_server.protocol.server_messages import CompletionSuggestion as CompletionSuggestion
from agent_server.protocol.server_messages import EditProposed as EditProposed
from agent_server.protocol.server_messages import Error as Error
from agent_server.protocol.server_messages import OutcomeAck as OutcomeAck
from agent_server.protocol.server_messages import Pong as Pong
from agent_server.protocol.server_messages import SessionInfo as SessionInfo
from agent_server.protocol.server_messages import SummaryMade as SummaryMade
from agent_server.protocol.server_messages import ToolRequest as ToolRequest
from agent_server.protocol.server_messages import TurnDone as TurnDone
from agent_server.protocol.server_messages import Welcome as Welcome
from feedback.vocab import EditorOutcomeKind

# ---- client -> server (server -> client: server_messages.py) --------------------------------


class Hello(_Message):
    """First message of a connection."""

    type: Literal["hello"] = "hello"
    protocol_version: int = Field(description=f"Must equal {PROTOCOL_VERSION}.")
    client: Annotated[str, Field(max_length=128), _NO_NUL] = Field(
        default="", description="Client name/version, for the logs."
    )


class SessionCreate(_Message):
    """Start a session; the editor answers its tool requests (it owns the files)."""

    type: Literal["session.create"] = "session.create"
    mode: Literal["interactive", "autonomous"] = Field(
        default="interactive",
        description="interactive: edits and commands wait for the person's decision.",
    )
    title: Annotated[str, Field(max_length=256), _NO_NUL] = ""
    workspace: Annotated[str, Field(max_length=4096), _NO_NUL] = Field(
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


class EditOutcome(_Message):
    """What the person did with a suggestion. Acknowledged after it is stored.

    The first accepted / rejected / partially_accepted outcome of an edit proposal is also the
    decision the waiting agent acts on. `client_event_id` makes the write idempotent.

    `written` is a follow-up of a suggestion that was not taken (rejected, or only a prefix
    of a completion taken): the settle time after the rejection, `final_text` is what the
    person wrote at its place instead -- for an inline completion, the text typed at the
    completion's position since (what stands between the text before it and the text after
    it, followed through other edits; "" when nothing was); for an edit proposal, the file's
    text when it changed. Not sent when the place cannot be followed (the document closed,
    or changed too much). It decides no label; the learner trains on it as a demonstration
    of what the model should have said (never on those of people who opted out).
    """

    type: Literal["edit.outcome"] = "edit.outcome"
    suggestion_id: _ID
    outcome: EditorOutcomeKind
    client_event_id: _ID
    client_time: datetime | None = None
    reason: Annotated[str, Field(max_length=8192), _NO_NUL] | None = Field(
        default=None,
        description="Why it was rejected (reaches the model). A reason starting with "
        "'[editor] ' means the editor answered for the person because it could not show the "
        "proposal; the learner does not train on it.",
    )
    accepted_hunks: list[Annotated[int, Field(ge=0)]] | None = Field(
        default=None, max_length=10000, description="For partially_accepted: Hunk.index values."
    )
    accepted_length: int | None = Field(default=None, ge=0, description="Accepted characters.")
    final_text: Annotated[_TEXT, _NO_NUL] | None = Field(
        default=None, description="Text after the person's edit."
    )


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
