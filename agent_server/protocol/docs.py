"""Generate docs/protocol.md and docs/protocol.schema.json from agent_server.protocol.messages.

Run: `.venv/bin/python -m agent_server.protocol.docs` (writes both files), or
`... -m agent_server.protocol.docs --check` (exit 1 when they are stale; the test does this).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from agent_server.protocol import messages as p
from agent_server.protocol.errors import ErrorCode
from agent_server.protocol.parts import HARD_MAX_FRAME_BYTES

DOCS = Path(__file__).resolve().parents[2] / "docs"
MD_PATH = DOCS / "protocol.md"
SCHEMA_PATH = DOCS / "protocol.schema.json"

_INTRO = """# The WebSocket protocol (version {version})

Generated from `agent_server/protocol/messages.py` by `python -m agent_server.protocol.docs`;
do not edit by hand. The JSON Schema of every message is in `protocol.schema.json`.

## Connecting

- URL: `ws://HOST:PORT/v1/ws`.
- Token: `Authorization: Bearer <token>` on the handshake (the VS Code extension and the CLI
  run outside a browser and set it), or `?token=<token>` in the URL for clients that cannot set
  headers. The token is the shared one (`$APPRENTICE_HOME/token` unless `APPRENTICE_TOKEN` is
  set) or a person's own (`apprentice users add NAME`). A missing, wrong or revoked token, or a
  browser `Origin` not in `allowed_origins`, is refused before the connection opens (HTTP 403
  on the handshake).
- Frames: JSON text objects with a `type`, at most {max_frame} bytes (larger: a
  `frame_too_large` error; a frame announcing more than {hard_max} bytes closes the connection
  with 1009 as soon as its header arrives). The client sends `hello` first and gets `welcome`.
- Limits per token: at most `max_connections_per_token` open connections (one more reads
  `too_many_connections` and is closed with 1013) and `messages_per_s` messages per second
  after a burst of `message_burst` (beyond: `rate_limited`, echoing the id; the message was not
  handled, resend it).
- Any client message may carry `id` (a string); replies to it echo the `id`, and so does every
  message of a turn started by `user.message`. Ids, names, paths, titles and outcome texts
  must not contain NUL (U+0000): such a message gets `invalid_message`.
- Sessions belong to the connection that created or resumed them, and to the person whose
  token made them (only they can resume them); they are stored in the feedback database and
  can be resumed after a reconnect or a server restart.
- Every suggestion (`edit.proposed`, `completion.suggestion`) is stored before it is sent;
  every `edit.outcome` is stored before `outcome.ack` is sent; repeating a `client_event_id`
  stores nothing new and is acknowledged again (`duplicate: true`).

## A turn

```
client                              server
hello                        ->
                             <-     welcome
session.create               ->
                             <-     session.info
user.message                 ->
                             <-     assistant.delta ...   (streamed text)
                             <-     tool.request          (the editor owns the files)
tool.result                  ->
                             <-     agent.step
                             <-     edit.proposed         (interactive mode)
edit.outcome                 ->
                             <-     outcome.ack
                             <-     summary.made          (when the context fills up)
                             <-     turn.done
```

## Error codes

| code | meaning |
|---|---|
{codes}
"""


def _type_name(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in schema:
        return " \\| ".join(_type_name(s) for s in schema["anyOf"])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list[{_type_name(schema.get('items', {}))}]"
    if kind == "object" and "additionalProperties" in schema:
        return "object"
    return str(kind)


def _fields_table(model: type[BaseModel]) -> str:
    schema = model.model_json_schema(ref_template="{model}")
    required = set(schema.get("required", []))
    rows = ["| field | type | required | description |", "|---|---|---|---|"]
    for name, prop in schema.get("properties", {}).items():
        desc = (prop.get("description") or "").replace("|", "\\|").replace("\n", " ")
        default = prop.get("default")
        if name not in required and default not in (None, [], {}, ""):
            desc = f"{desc} Default: `{json.dumps(default)}`.".strip()
        rows.append(
            f"| `{name}` | {_type_name(prop)} | {'yes' if name in required else ''} | {desc} |"
        )
    return "\n".join(rows)


def _section(title: str, models: tuple[type[p._Message], ...]) -> list[str]:
    out = [f"## {title}", ""]
    for model in models:
        out += [f"### `{p.message_type(model)}`", ""]
        if model.__doc__ and not model.__doc__.startswith(model.__name__ + "("):
            out += [" ".join(model.__doc__.split()), ""]
        out += [_fields_table(model), ""]
    return out


def _shared_section() -> list[str]:
    out = ["## Shared objects", ""]
    for model in (
        p.EditorContext,
        p.Selection,
        p.Position,
        p.Diagnostic,
        p.Hunk,
        p.Usage,
        p.ToolError,
        p.TranscriptEntry,
    ):
        out += [f"### {model.__name__}", "", _fields_table(model), ""]
    return out


def render_markdown() -> str:
    codes = "\n".join(f"| `{c.value}` | {c.meaning} |" for c in ErrorCode)
    text = _INTRO.format(
        version=p.PROTOCOL_VERSION,
        max_frame=p.MAX_FRAME_BYTES,
        hard_max=HARD_MAX_FRAME_BYTES,
        codes=codes,
    )
    lines = [text]
    lines += _section("Client to server", p.CLIENT_MESSAGES)
    lines += _section("Server to client", p.SERVER_MESSAGES)
    lines += _shared_section()
    return "\n".join(lines).rstrip() + "\n"


def render_schema() -> str:
    schema = p.any_adapter.json_schema()
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"Apprentice WebSocket protocol v{p.PROTOCOL_VERSION}",
        "description": "Any message of /v1/ws, both directions; `type` discriminates.",
        **schema,
    }
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    wanted = {MD_PATH: render_markdown(), SCHEMA_PATH: render_schema()}
    if "--check" in args:
        stale = [
            str(path)
            for path, text in wanted.items()
            if not path.exists() or path.read_text() != text
        ]
        if stale:
            print("stale (run python -m agent_server.protocol.docs):", *stale, sep="\n  ")
            raise SystemExit(1)
        return
    DOCS.mkdir(exist_ok=True)
    for path, text in wanted.items():
        path.write_text(text)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
