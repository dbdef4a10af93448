"""JSON-schema constrained replies: the request field and the parser, shared by the backends.

`response_format(schema)` is what an OpenAI-compatible server (vLLM) takes to constrain
decoding; `parse_json(text)` reads the reply. It parses with `strict=False` because a barely
trained model may put raw control characters inside JSON strings, which the grammar allows
and strict `json.loads` refuses (field notes). Bound prose strings (`maxLength`) and
`max_tokens` in schemas so a constrained reply closes -- but not a string that must hold
escapes: xgrammar forbids `\"`, `\\` and `\n` in length-bounded strings (agent/actions.py).
"""

from __future__ import annotations

import json
from typing import Any


def response_format(schema: dict[str, Any], name: str = "reply") -> dict[str, Any]:
    """The `response_format` request field that constrains the reply to `schema`."""
    if not isinstance(schema, dict) or not schema:
        raise ValueError("schema must be a non-empty JSON Schema object (a dict)")
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


def parse_json(text: str) -> Any:
    """Parse a constrained reply; raises json.JSONDecodeError when it is not JSON."""
    return json.loads(text, strict=False)
