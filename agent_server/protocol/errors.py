"""Typed error codes of the HTTP API and the WebSocket protocol.

A person-facing error is an `ApiError(code, message)`; the WebSocket handler turns it into an
`error` message (echoing the request `id`), the HTTP routers into a JSON error response.
Model-fixable errors (bad edit, tool error, malformed action) never come here: the agent loop
hands them back to the model as observations.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    """Stable codes clients can switch on; `meaning` is documented in docs/protocol.md."""

    BAD_JSON = "bad_json", "The frame is not valid JSON."
    BAD_MESSAGE = "bad_message", "The frame is JSON but not an object with a string `type`."
    UNKNOWN_TYPE = "unknown_type", "No client message has this `type`."
    INVALID_MESSAGE = "invalid_message", "A field is missing, unknown or of the wrong type."
    FRAME_TOO_LARGE = "frame_too_large", "The frame is larger than the server's limit."
    BINARY_FRAME = "binary_frame", "Binary frames are not part of the protocol; send text."
    HELLO_REQUIRED = "hello_required", "Send `hello` before anything else."
    UNSUPPORTED_VERSION = "unsupported_version", "The client's protocol_version is not served."
    SESSION_NOT_FOUND = "session_not_found", "No stored session has this id."
    SESSION_NOT_OWNED = "session_not_owned", "The session belongs to another connection."
    SESSION_IN_USE = "session_in_use", "Another open connection holds this session."
    TURN_IN_PROGRESS = "turn_in_progress", "The session is already running a turn."
    NO_TURN = "no_turn", "The session has no running turn to cancel."
    UNKNOWN_REQUEST = "unknown_request", "No pending tool/approval request has this id."
    SUGGESTION_NOT_FOUND = "suggestion_not_found", "No stored suggestion has this id."
    OUTCOME_CONFLICT = (
        "outcome_conflict",
        "This client_event_id was stored for another suggestion or outcome; use a new id.",
    )
    RATE_LIMITED = (
        "rate_limited",
        "Too many messages per second on this token; the message was not handled: resend it later.",
    )
    TOO_MANY_CONNECTIONS = (
        "too_many_connections",
        "This token has the most open connections allowed; the new one is closed (1013).",
    )
    MODEL_UNAVAILABLE = "model_unavailable", "The model backend cannot be reached."
    MODEL_ERROR = "model_error", "The model backend failed."
    INTERNAL = "internal", "An unexpected server error (see the server log)."

    meaning: str

    def __new__(cls, value: str, meaning: str) -> ErrorCode:
        member = str.__new__(cls, value)
        member._value_ = value
        member.meaning = meaning
        return member


class ApiError(Exception):
    """A person-facing error with a stable code."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.meaning)
        self.code = code
        self.message = message or code.meaning
