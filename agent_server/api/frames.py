"""Turn one WebSocket frame into a client message, or into a typed `ApiError`.

Every failure is classified (bad_json, bad_message, unknown_type, invalid_message,
frame_too_large, binary_frame) and carries the frame's `id` when one can be read, so the
client can match the error to what it sent. Never raises anything else, whatever the bytes:
tests/api/test_bad_input.py and test_fuzz_ws.py throw thousands of random frames at it
through a real server.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from agent_server.protocol import messages as p
from agent_server.protocol.errors import ApiError, ErrorCode

_MAX_DETAILS = 3  # validation errors quoted in the message


class FrameError(ApiError):
    def __init__(self, code: ErrorCode, message: str, frame_id: str | None) -> None:
        super().__init__(code, message)
        self.frame_id = frame_id


def parse_frame(text: str | None, data: bytes | None, *, max_bytes: int) -> Any:
    """The validated client message of a frame (a member of protocol.ClientMessage)."""
    if text is None:
        size = len(data or b"")
        raise FrameError(ErrorCode.BINARY_FRAME, f"got a binary frame of {size} bytes", None)
    # A str's UTF-8 length is at least its length and at most 4x: encode only when unsure.
    if len(text) > max_bytes or (len(text) * 4 > max_bytes and len(text.encode()) > max_bytes):
        raise FrameError(
            ErrorCode.FRAME_TOO_LARGE,
            f"frame larger than {max_bytes} bytes; send large files through tool results in pieces",
            None,
        )
    try:
        return p.client_adapter.validate_json(text)
    except ValidationError as exc:
        raise _classify(exc, text) from None
    except (ValueError, RecursionError) as exc:  # e.g. absurdly deep nesting
        raise FrameError(ErrorCode.BAD_JSON, f"unreadable frame: {exc}", None) from None


def _classify(exc: ValidationError, text: str) -> FrameError:
    errors = exc.errors(include_url=False, include_input=False)
    first = errors[0] if errors else {"type": "", "loc": (), "msg": str(exc)}
    kind = first["type"]
    frame_id = _frame_id(text) if kind != "json_invalid" else None
    if kind == "json_invalid":
        return FrameError(ErrorCode.BAD_JSON, f"not valid JSON: {first['msg']}", None)
    if kind in ("dict_type", "model_type", "model_attributes_type", "union_tag_not_found"):
        return FrameError(
            ErrorCode.BAD_MESSAGE, "a frame is one JSON object with a string `type`", frame_id
        )
    if kind == "union_tag_invalid":
        return FrameError(ErrorCode.UNKNOWN_TYPE, first["msg"], frame_id)
    details = "; ".join(
        f"{'.'.join(str(x) for x in e['loc'][1:]) or '(message)'}: {e['msg']}"
        for e in errors[:_MAX_DETAILS]
    )
    more = f" (+{len(errors) - _MAX_DETAILS} more)" if len(errors) > _MAX_DETAILS else ""
    return FrameError(ErrorCode.INVALID_MESSAGE, details + more, frame_id)


def _frame_id(text: str) -> str | None:
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if isinstance(obj, dict):
        value = obj.get("id")
        if isinstance(value, str) and 0 < len(value) <= 128:
            return value
    return None
