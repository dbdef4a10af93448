"""What WebSocket messages are built from: the version, the frame limit, the message base
class and the objects messages carry (editor context, hunks, usage...).

Part of the protocol: agent_server/protocol/messages.py holds the messages and re-exports these
(client_messages.py and server_messages.py the two directions).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain NUL (U+0000)")
    return value


# Ids, names and paths end up in PostgreSQL text columns or lookups, which cannot hold U+0000
# (the driver fails: an `internal` error); with this they get `invalid_message` instead.
# tests/api/test_fuzz_ws.py found it. No JSON Schema change: it only validates.
_NO_NUL = AfterValidator(_no_nul)
_ID = Annotated[str, Field(min_length=1, max_length=128), _NO_NUL]
_TEXT = Annotated[str, Field(max_length=512 * 1024)]
_PATH = Annotated[str, Field(max_length=4096), _NO_NUL]

PROTOCOL_VERSION = 1
MAX_FRAME_BYTES = 1024 * 1024  # larger frames get an `error` (frame_too_large)
# A frame announcing more closes the connection (1009) from its header, never buffered.
HARD_MAX_FRAME_BYTES = 4 * 1024 * 1024


def _require_type(schema: dict[str, Any]) -> None:
    # `type` has a default so Python code can omit it, but on the wire it is required.
    schema["required"] = ["type", *[r for r in schema.get("required", []) if r != "type"]]


# The base of every message. No docstring: pydantic would give it to the JSON Schema.
class _Message(BaseModel):
    model_config = ConfigDict(
        extra="forbid", strict=True, frozen=True, json_schema_extra=_require_type
    )

    id: str | None = Field(
        default=None,
        max_length=128,
        description="Optional; echoed in every reply to this message.",
    )


class Position(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    line: int = Field(ge=0, description="0-based line.")
    character: int = Field(ge=0, description="0-based column (UTF-16 units, as LSP).")


class Selection(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    start: Position
    end: Position
    text: _TEXT = Field(default="", description="The selected text.")


class Diagnostic(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    path: _PATH | None = Field(default=None, description="File; default: the open file.")
    line: int = Field(ge=0, description="0-based line.")
    severity: Literal["error", "warning", "information", "hint"] = "error"
    message: Annotated[str, Field(max_length=8192)]
    source: Annotated[str, Field(max_length=256)] | None = None


class EditorContext(BaseModel):
    """What the editor shows while the person writes: grounds the agent's first step."""

    model_config = ConfigDict(extra="forbid", strict=True)
    path: _PATH | None = Field(default=None, description="Open file, workspace-relative.")
    language: Annotated[str, Field(max_length=64)] | None = None
    selection: Selection | None = None
    diagnostics: list[Diagnostic] = Field(default_factory=list, max_length=200)


class Hunk(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    index: int = Field(ge=0, description="Index used in partially_accepted outcomes.")
    header: str = Field(description="The @@ line.")
    diff: str = Field(description="The hunk as unified-diff text (with its header).")


class Usage(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model_calls: int = 0


class ToolError(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    code: Annotated[str, Field(max_length=64)] = Field(
        description="A WorkspaceError kind, e.g. file_not_found, path_outside_workspace."
    )
    message: Annotated[str, Field(max_length=16384)]


class TranscriptEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    seq: int
    kind: str
    role: str | None = None
    text: str


__all__ = [
    "Diagnostic",
    "EditorContext",
    "Hunk",
    "Position",
    "Selection",
    "ToolError",
    "TranscriptEntry",
    "Usage",
]
