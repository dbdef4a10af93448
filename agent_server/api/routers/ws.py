"""`/v1/ws`: the WebSocket. Checks token and Origin before accepting, then hands over to
`Connection` (connection.py), which speaks the protocol in protocol.py."""

from __future__ import annotations

import asyncio
import logging

from fastapi import APIRouter, WebSocket, status

from agent_server.api.auth import websocket_token
from agent_server.api.connection import Connection
from agent_server.protocol import messages as p
from agent_server.protocol.errors import ErrorCode

router = APIRouter()
log = logging.getLogger(__name__)


@router.websocket("/v1/ws")
async def websocket(ws: WebSocket) -> None:
    services = ws.app.state.services
    origin = ws.headers.get("origin")
    if not services.auth.origin_allowed(origin):
        log.warning("refused WebSocket from origin %r", origin)
        services.metrics.ws_refused.labels("origin").inc()
        # Closing before accept makes the server answer the handshake with HTTP 403.
        await ws.close(code=status.WS_1008_POLICY_VIOLATION)
        return
    principal = await asyncio.to_thread(services.auth.identify, websocket_token(ws), services.db)
    if principal is None:  # unknown, wrong or revoked
        services.metrics.ws_refused.labels("token").inc()
        await ws.close(code=status.WS_1008_POLICY_VIOLATION)
        return
    await ws.accept()
    if not services.limits.open(principal.key):
        # Accepted first so that the client reads why; 1013: try again later.
        services.metrics.ws_refused.labels("connections").inc()
        error = p.Error(
            code=ErrorCode.TOO_MANY_CONNECTIONS,
            message=f"{ErrorCode.TOO_MANY_CONNECTIONS.meaning} Close another first.",
        )
        await ws.send_text(p.encode(error))
        await ws.close(code=status.WS_1013_TRY_AGAIN_LATER)
        return
    services.metrics.ws_opened.inc()
    services.metrics.ws_open.inc()
    try:
        await Connection(ws, services, principal).serve()
    finally:
        services.metrics.ws_open.dec()
        services.limits.close(principal.key)
