"""The WebSocket protocol at /v1/ws: the wire format every transport and client shares.

- `messages.py` — every message type as pydantic models (the source of truth): the client's
  here, the server's in `server_messages.py`, both reachable as `messages`' attributes;
  `parts.py` — the pieces messages are built from (base class, version, frame limit, objects);
- `errors.py` — typed error codes (`ErrorCode`) and the person-facing `ApiError`;
- `client.py` — `ProtocolClient`, the client side (the terminal chat, the language server's
  remote mode, tests and benches);
- `docs.py` — generates docs/protocol.md and docs/protocol.schema.json from the messages
  (`python -m agent_server.protocol.docs`).

No web framework here: the server side (FastAPI, frames, connections) is `agent_server.api`.
"""
